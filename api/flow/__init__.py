"""Flow-control policies: backlog quota, max unacked messages, message TTL."""
