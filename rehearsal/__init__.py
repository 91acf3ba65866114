"""`make rehearse`: two replicas behind a load balancer on loopback (docs/kubernetes.md)."""
