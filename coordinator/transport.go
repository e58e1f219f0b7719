package coordinator

import (
	"google.golang.org/grpc"

	"github.com/leasegate/leasegate/internal/store"
)

// DialOptions are the gRPC dial options leasegate needs on the etcd client
// it is given: add them to clientv3.Config.DialOptions. They let leasegate
// tell a request that never left this process (authority_unavailable: hold,
// nothing written) from one that was sent and whose answer never came back
// (outcome_unknown). On a client built without them, every failed write is
// reported as outcome_unknown, since nothing shows that it was not sent.
// How a failed request is classified is internal/store/transport.go's.
func DialOptions() []grpc.DialOption { return store.DialOptions() }
