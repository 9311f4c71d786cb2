"""Policy kinds as data: one descriptor per kind (``kinds``), one route factory (``router``),
the stores, reads and provenance they share."""
