"""How confident to be: the confidence breakdown, CRAG, calibration, tuning, weights profiles."""
