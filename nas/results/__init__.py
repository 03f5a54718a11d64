"""Results: summaries, plots, reports, model cards, export."""
