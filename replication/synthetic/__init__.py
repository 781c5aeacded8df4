"""The synthetic study (paper Section 5.1, appendix 'Synthetic Problems', Figures 1-5)."""
