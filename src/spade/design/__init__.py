"""Design end to end: request, sample, extract, check, review, archive and hint one regeneration."""
