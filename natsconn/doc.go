// Package natsconn is the engine's NATS side: the users and permissions of
// the embedded default (users.go), the engine's connection, to its
// embedded server or to a cluster, with its options (credentials files,
// nkeys, TLS, user and password; Connect), and the PARLEY stream's setup
// at start (EnsureStream), which refuses to create a stream anew where
// snapshots show one was folded. package service assembles it with the
// engine's other parts.
//
// Its errors read "service: ...", as they did when this was part of
// package service: operators and tests match them.
package natsconn
