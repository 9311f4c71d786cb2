"""Reports over REST: rate and backlog results, run history, charts, on-demand runs."""
