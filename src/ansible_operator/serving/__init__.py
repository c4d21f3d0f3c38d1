"""What the operator's HTTP servers share: limits, malformed requests, certificates."""
