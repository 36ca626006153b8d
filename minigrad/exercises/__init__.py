"""Checks for the lessons' exercises: check_<name>(your_function) prints PASS or FAIL with the
first failing case. Each lesson's checks live in lessonNN.py."""
