"""Probe scripts, each run by file path in a child process (never imported by kernelpolicy).

Each prints one ``KPROBE {json}`` line per finished step and needs only the standard
library and the package it probes.
"""
