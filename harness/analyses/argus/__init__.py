"""ARGUS: audit of entity mentions, the probe trained on it, augmentation of a corpus view, and the paired comparison."""
