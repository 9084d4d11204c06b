// Command empty does nothing: BenchmarkLaunchFloor times its start and exit.
package main

func main() {}
