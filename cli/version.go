package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"
	etcdversion "go.etcd.io/etcd/api/v3/version"

	"github.com/leasegate/leasegate/coordinator"
)

// The module paths whose versions `leasegate version` reports.
const (
	modulePath     = "github.com/leasegate/leasegate"
	etcdClientPath = "go.etcd.io/etcd/client/v3"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print leasegate's version, VCS revision, Go and etcd client versions",
		Description: example(`Prints the module version of this binary ("(devel)" when built from a
checkout), the VCS revision and time it was built from (with "+dirty" if the
checkout had uncommitted changes; "unknown" when the build recorded none, as
with 'go run' or 'go test'), the Go version it was built with, and the version
of the etcd client it links. 'leasegate --version' prints the same.`,
			"leasegate version", "leasegate version -o json"),
		Action: version,
	}
}

// versionOutput is what `leasegate version` prints.
type versionOutput struct {
	Disposition  coordinator.Disposition `json:"disposition"`
	Version      string                  `json:"version"`      // module version, "(devel)" from a checkout
	Revision     string                  `json:"vcs_revision"` // commit; "unknown" when not recorded
	RevisionTime string                  `json:"vcs_time"`     // commit time (RFC 3339), "" when not recorded
	Modified     bool                    `json:"vcs_modified"` // the checkout had uncommitted changes
	GoVersion    string                  `json:"go_version"`   // the toolchain that built the binary
	EtcdClient   string                  `json:"etcd_client"`  // version of go.etcd.io/etcd/client/v3 linked in
	EtcdAPI      string                  `json:"etcd_api"`     // etcd API version the client speaks
	Platform     string                  `json:"platform"`     // GOOS/GOARCH
}

func version(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	return printVersion(c)
}

func printVersion(c *cli.Context) error {
	bi, _ := debug.ReadBuildInfo()
	v := versionOf(bi)
	rev := v.Revision
	if v.Modified {
		rev += "+dirty"
	}
	return globalsOf(c).out.result(v, table{
		header: []string{"VERSION", "VCS-REVISION", "VCS-TIME", "GO", "ETCD-CLIENT", "PLATFORM"},
		rows:   [][]string{{v.Version, rev, orDash(v.RevisionTime), v.GoVersion, v.EtcdClient, v.Platform}},
	})
}

// versionOf reads the versions off the binary's build info (nil when the
// binary has none).
func versionOf(bi *debug.BuildInfo) versionOutput {
	v := versionOutput{Disposition: ok, Version: "unknown", Revision: "unknown",
		GoVersion: runtime.Version(), EtcdClient: "v" + etcdversion.Version, EtcdAPI: etcdversion.APIVersion,
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		switch {
		case d.Path == modulePath && v.Version == "unknown":
			v.Version = d.Version // linked into another program
		case d.Path == etcdClientPath:
			v.EtcdClient = d.Version
			if d.Replace != nil {
				v.EtcdClient += " => " + d.Replace.Path + " " + d.Replace.Version
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.RevisionTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
