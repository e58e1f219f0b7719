package cli

import (
	"runtime/debug"
	"testing"
)

// TestVersionOfBuildInfo: the module version, VCS revision, time and dirty
// flag and the etcd client's version are read off the build info.
func TestVersionOfBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: modulePath, Version: "v1.2.3"},
		Deps:      []*debug.Module{{Path: "go.uber.org/zap", Version: "v1.28.0"}, {Path: etcdClientPath, Version: "v3.7.3"}},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "35f5e4fc"}, {Key: "vcs.time", Value: "2026-11-30T12:57:02Z"},
			{Key: "vcs.modified", Value: "true"}},
	}
	v := versionOf(bi)
	if v.Version != "v1.2.3" || v.Revision != "35f5e4fc" || v.RevisionTime != "2026-11-30T12:57:02Z" || !v.Modified ||
		v.GoVersion != "go1.99.1" || v.EtcdClient != "v3.7.3" {
		t.Fatalf("versionOf: %+v", v)
	}
	// Linked into another program: the version is that of the dependency.
	bi.Main = debug.Module{Path: "example.com/tool", Version: "v0.1.0"}
	bi.Deps = append(bi.Deps, &debug.Module{Path: modulePath, Version: "v1.4.0"})
	bi.Settings = nil
	if v := versionOf(bi); v.Version != "v1.4.0" || v.Revision != "unknown" || v.Modified {
		t.Fatalf("versionOf as a dependency: %+v", v)
	}
	if v := versionOf(nil); v.Version != "unknown" || v.GoVersion == "" || v.EtcdClient == "" {
		t.Fatalf("versionOf(nil): %+v", v)
	}
}
