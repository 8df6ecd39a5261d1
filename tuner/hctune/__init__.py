"""hctune: profile a program's heap, tune the HC allocator (Hasan & Chang 2006) to it, emit malloc.c."""

__version__ = "0.1.0"
