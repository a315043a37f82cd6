//go:build !race

package integration

const underRace = false
