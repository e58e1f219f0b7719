// The runnable replay of seed 003 on Temporal. A module of its own, as
// temporal/ is, so the core module does not inherit Temporal's
// dependencies; its pins are temporal/'s (see temporal/go.mod).
module github.com/leasegate/leasegate/examples/temporal

go 1.26.8

require (
	github.com/leasegate/leasegate v0.0.0
	github.com/leasegate/leasegate/temporal v0.0.0
	go.temporal.io/server v1.30.4
)

replace (
	github.com/leasegate/leasegate => ../../
	github.com/leasegate/leasegate/temporal => ../../temporal
)
