"""Archive building, readiness checks and S3 publish / pull / promote."""
