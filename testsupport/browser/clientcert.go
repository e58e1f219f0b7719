package browser

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ClientCertificate is the options that make Chromium present the client
// certificate in p12File (PKCS#12, under password) to each of origins
// ("https://127.0.0.1:7443"), with caFile trusted for websites: what a
// person does by importing the file and picking the certificate, done
// headless with no dialog.
//
// Chromium on Linux keeps certificates in the NSS database of $HOME
// (~/.pki/nssdb): one is made in a temporary HOME with certutil and
// pk12util (Debian's libnss3-tools; make browser installs it). It picks a
// certificate without asking where the profile's auto_select_certificate
// content setting says so — the per-profile form of Chromium's
// AutoSelectCertificateForUrls policy, which needs no root and no file
// outside the test: the profile's Default/Preferences names the origins.
// One Browser presents one identity; start another for another.
func ClientCertificate(t testing.TB, p12File, password, caFile string, origins ...string) []Option {
	t.Helper()
	for _, tool := range []string{"certutil", "pk12util"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " not found (Debian's libnss3-tools): run make browser"
			if required() {
				t.Fatal(msg + "; " + RequireEnv + " is set, so this fails instead of skipping")
			}
			t.Skip(msg)
		}
	}
	home, profile := t.TempDir(), t.TempDir()
	db := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(db, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("browser: %s %v: %v\n%s", name, args, err, out)
		}
	}
	run("certutil", "-N", "-d", "sql:"+db, "--empty-password")
	run("pk12util", "-i", p12File, "-d", "sql:"+db, "-W", password)
	run("certutil", "-A", "-d", "sql:"+db, "-n", "test CA", "-t", "C,,", "-i", caFile)
	auto := map[string]any{}
	for _, o := range origins {
		auto[o+",*"] = map[string]any{"setting": map[string]any{"filters": []any{map[string]any{}}}}
	}
	prefs, err := json.Marshal(map[string]any{"profile": map[string]any{"content_settings": map[string]any{
		"exceptions": map[string]any{"auto_select_certificate": auto}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(profile, "Default"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profile, "Default", "Preferences"), prefs, 0o600); err != nil {
		t.Fatal(err)
	}
	return []Option{WithEnv("HOME=" + home), WithUserDataDir(profile)}
}
