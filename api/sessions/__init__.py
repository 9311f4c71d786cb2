"""Data-plane sessions over HTTP: a client trades its token for short-lived Redis credentials
that carry its role's produce and consume grants (``dataplane.sessions``), and looks up (or
creates on first use) the topics it may use."""
