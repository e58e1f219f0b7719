package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/leasegate/leasegate/coordinator"
)

var pageNames = []string{"now", "effects", "operation", "error"}

var funcs = template.FuncMap{
	"lease": func(id int64) string {
		if id == 0 {
			return "—"
		}
		return coordinator.FormatLeaseID(id)
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"ttl": func(s int64) string {
		if s < 0 {
			return "—"
		}
		return fmt.Sprintf("%ds", s)
	},
	// deadline is when a TTL read at now runs out, in Unix milliseconds,
	// for the page's countdown (0: none).
	"deadline": func(now time.Time, s int64) int64 {
		if s < 0 {
			return 0
		}
		return now.Add(time.Duration(s) * time.Second).UnixMilli()
	},
	"json": func(b json.RawMessage) string {
		if len(b) == 0 {
			return ""
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return string(b)
		}
		out, _ := json.MarshalIndent(v, "", "  ")
		return visible(string(out))
	},
	"vis": visible,
	"opPath": func(tenant, task, operation string) string {
		return Path + "op/" + url.PathEscape(tenant) + "/" + url.PathEscape(task) + "/" + url.PathEscape(operation)
	},
	"path": func() string { return Path },
}

// visible is s with every character that changes how text reads without
// being seen — Unicode's format characters (the bidirectional overrides
// and isolates, zero-width characters) and control characters but the
// newline and the tab — written out as [U+XXXX]. The console shows what a
// worker, a provider or a person put in a record through it, so that a
// right-to-left override cannot make a target or a parameter read as
// another (an approver judges what it reads; the digest binds the bytes).
func visible(s string) string {
	if strings.IndexFunc(s, invisible) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if invisible(r) {
			fmt.Fprintf(&b, "[U+%04X]", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.IsControl(r) && r != '\n' && r != '\t'
}

func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: templates: %w", err)
		}
		out[name] = t
	}
	return out, nil
}
