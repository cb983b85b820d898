"""Bisection: find the commit that caused a regression."""
