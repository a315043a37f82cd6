// Package datadir holds the engine's lock on its data directory (flock,
// on unix): one engine per directory, since a second would open the same
// store and overwrite the same snapshots.
package datadir
