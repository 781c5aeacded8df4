"""The paper's three studies: synthetic functions, noisy-label image classification, prompt tuning."""
