"""Model definitions used by tf2tosa's regression suites (``models.zoo``) and bundled sample models."""
