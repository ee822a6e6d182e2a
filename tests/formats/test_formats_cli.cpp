// placeholder, filled in by the formats helper
