"""Reporting: stats snapshots landed as Parquet, Spark jobs that compute rate and backlog
reports, their results in the control-plane database, and the Celery app that schedules them.

Layout: ``lake`` lands snapshots; ``transforms`` holds the pure DataFrame functions;
``jobs`` wires read → transform → write for each job; ``store`` records runs and writes
results; ``celery_app`` schedules it all; ``charts`` draws results.
"""
