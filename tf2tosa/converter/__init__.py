"""Frontends (``.tflite`` …), the conversion pipeline and its passes."""
