"""Evaluation: what a protection costs in information and leaves in risk (summaries, measures,
plots, reports)."""
