"""Package data: digits.npz (loaded by minigrad.data.digits). See README.md here for its source."""
