package main

// version is stamped by the build (-ldflags -X main.version=...).
var version = "unknown"
