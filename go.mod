module github.com/parley-engine/parley

go 1.26.0

require (
	github.com/go-json-experiment/json v1.27.2
	github.com/google/uuid v1.6.0
	golang.org/x/text v0.44.0
)
