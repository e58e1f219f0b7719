package realprov

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// PostgresBin is where Debian's postgresql-15 package puts the server's
// binaries; LEASEGATE_PGBIN overrides it.
const PostgresBin = "/usr/lib/postgresql/15/bin"

// ErrAbsent is returned when a provider's binaries are not installed.
var ErrAbsent = errors.New("realprov: provider binaries absent (make test-providers installs them)")

// SkipLine is the one line a test skips with when a provider is absent.
const SkipLine = "real provider absent: run make test-providers (installs postgresql, bind9, bind9-dnsutils)"

func pgBin(name string) string {
	dir := os.Getenv("LEASEGATE_PGBIN")
	if dir == "" {
		dir = PostgresBin
	}
	return filepath.Join(dir, name)
}

// HavePostgres reports whether initdb, pg_basebackup and postgres are
// installed.
func HavePostgres() error {
	for _, b := range []string{"initdb", "pg_basebackup", "postgres"} {
		if _, err := os.Stat(pgBin(b)); err != nil {
			return fmt.Errorf("%w: %s", ErrAbsent, pgBin(b))
		}
	}
	return nil
}

// HaveBIND reports whether named and nsupdate are installed.
func HaveBIND() error {
	for _, b := range []string{"named", "nsupdate"} {
		if _, err := exec.LookPath(b); err != nil {
			if _, err2 := os.Stat("/usr/sbin/" + b); err2 != nil {
				return fmt.Errorf("%w: %s", ErrAbsent, b)
			}
		}
	}
	return nil
}

func namedPath() string {
	if p, err := exec.LookPath("named"); err == nil {
		return p
	}
	return "/usr/sbin/named"
}

// Skip skips t with SkipLine when have reports the provider absent. Under
// make test-providers (LEASEGATE_REQUIRE_PROVIDERS=1) and in CI (CI=true)
// an absent provider fails instead: both install them first, so absence
// there is a broken install step, not a machine without them.
func Skip(t testing.TB, have func() error) {
	t.Helper()
	if err := have(); err != nil {
		if os.Getenv("LEASEGATE_REQUIRE_PROVIDERS") == "1" || os.Getenv("CI") == "true" {
			t.Fatalf("%v (the providers were to be installed first: make providers)", err)
		}
		t.Skip(SkipLine)
	}
}

// account is who a server runs as: the postgres system user when the
// caller is root (PostgreSQL refuses root), the caller otherwise.
type account struct {
	uid, gid int
	cred     *syscall.Credential // nil: run as the caller
}

func serverAccount(name string) (account, error) {
	if os.Geteuid() != 0 {
		return account{uid: os.Getuid(), gid: os.Getgid()}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return account{}, fmt.Errorf("realprov: running as root needs the %s system user (the Debian package creates it): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return account{uid: uid, gid: gid, cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// command is exec.Command run as a, in its own process group (so a
// terminal's signals do not reach it and a group can be stopped).
func (a account) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: a.cred, Pdeathsig: syscall.SIGKILL}
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL=C", "TZ=UTC"}
	return cmd
}

// mkdir makes a directory owned by a.
func (a account) mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, a.uid, a.gid)
}

// writeFile writes a file owned by a, readable only by it.
func (a account) writeFile(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chown(path, a.uid, a.gid)
}

// run runs a command as a and returns its error with its output.
func (a account) run(name string, args ...string) error {
	cmd := a.command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("realprov: %s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ProcessesIn lists the pids of running processes whose working directory
// is dir or under it: a harness's servers (PostgreSQL and named chdir into
// their directories) that outlived Close.
func ProcessesIn(dir string) []int {
	dir, _ = filepath.Abs(dir)
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		if cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			out = append(out, pid)
		}
	}
	return out
}
