// Placeholder translation unit for layers that are header-only so far.
