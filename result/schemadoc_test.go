package result

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/run-json.md's generated field tables from the Go types")

const schemaDoc = "../docs/run-json.md"

// The field tables of docs/run-json.md are the Go types run.json is
// decoded into: a field added, renamed or given a new comment fails this
// test until the reference says so (-update rewrites the tables).
func TestDocRunJSON(t *testing.T) {
	runTables := schemaTables(t, "Run", "", []string{"*.go", "../fabric/device.go"})
	benchTables := schemaTables(t, "Run", "bench.", []string{"../bench/*.go"})
	b, err := os.ReadFile(schemaDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range []struct{ marker, want string }{{"run", runTables}, {"bench", benchTables}} {
		begin, end := "<!-- "+s.marker+"-fields:begin -->\n", "<!-- "+s.marker+"-fields:end -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s lacks the %q ... %q markers", schemaDoc, strings.TrimSpace(begin), end)
		}
		if doc[i+len(begin):j] == s.want {
			continue
		}
		if !*update {
			t.Errorf("%s: the %s field tables differ from the Go types; run go test ./result -run TestDocRunJSON -update", schemaDoc, s.marker)
			continue
		}
		doc = doc[:i+len(begin)] + s.want + doc[j:]
	}
	if *update {
		if err := os.WriteFile(schemaDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The reference says what every schema version added: bumping
// SchemaVersion without a row in its table fails here.
func TestDocSchemaVersions(t *testing.T) {
	b, err := os.ReadFile(schemaDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| (\d+) \| \S`).FindAllStringSubmatch(string(b), -1)
	seen := map[int]bool{}
	for _, r := range rows {
		v, _ := strconv.Atoi(r[1])
		seen[v] = true
	}
	for v := 1; v <= SchemaVersion; v++ {
		if !seen[v] {
			t.Errorf("%s has no row for schema version %d in its table of versions", schemaDoc, v)
		}
	}
	if seen[SchemaVersion+1] {
		t.Errorf("%s describes schema version %d, newer than this build's %d", schemaDoc, SchemaVersion+1, SchemaVersion)
	}
}

// structDoc is one struct type of the schema, its fields in order.
type structDoc struct {
	doc    string
	fields []fieldDoc
}

type fieldDoc struct {
	json, typ, ref, doc string
}

// schemaTables renders the struct types reachable from root in the Go
// files matched by globs as one Markdown table each, root first and the
// others in the order they are first referenced; prefix keeps the
// headings of two files' types apart.
func schemaTables(t *testing.T, root, prefix string, globs []string) string {
	t.Helper()
	structs := map[string]*structDoc{}
	fset := token.NewFileSet()
	for _, g := range globs {
		files, _ := filepath.Glob(g)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, sp := range gd.Specs {
					ts := sp.(*ast.TypeSpec)
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					doc := gd.Doc
					if ts.Doc != nil {
						doc = ts.Doc
					}
					structs[ts.Name.Name] = &structDoc{doc: oneLine(doc), fields: fieldsOf(st)}
				}
			}
		}
	}
	if structs[root] == nil {
		t.Fatalf("no struct %s in %v", root, globs)
	}
	order, seen := []string{root}, map[string]bool{root: true}
	for i := 0; i < len(order); i++ {
		for _, f := range structs[order[i]].fields {
			if f.ref != "" && structs[f.ref] != nil && !seen[f.ref] {
				seen[f.ref] = true
				order = append(order, f.ref)
			}
		}
	}
	var b strings.Builder
	for i, name := range order {
		s := structs[name]
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "#### %s%s\n\n", prefix, name)
		if s.doc != "" {
			fmt.Fprintf(&b, "%s\n\n", s.doc)
		}
		b.WriteString("| field | type | unit | meaning |\n|---|---|---|---|\n")
		for _, f := range s.fields {
			typ := "`" + f.typ + "`"
			if f.ref != "" && structs[f.ref] != nil {
				typ = fmt.Sprintf("[%s](#%s)", f.typ, strings.ToLower(strings.ReplaceAll(prefix, ".", "")+f.ref))
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.json, typ, unitOf(f.json, f.doc), cell(f.doc))
		}
	}
	return b.String()
}

// fieldsOf lists a struct's JSON fields; embedded and untagged fields
// are not in the JSON under their own names and are left out.
func fieldsOf(st *ast.StructType) []fieldDoc {
	var out []fieldDoc
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) == 0 {
			continue
		}
		tag, _ := strconv.Unquote(f.Tag.Value)
		name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		doc := oneLine(f.Doc)
		if c := oneLine(f.Comment); c != "" {
			doc = strings.TrimSpace(doc + " " + c)
		}
		typ, ref := typeName(f.Type)
		out = append(out, fieldDoc{json: name, typ: typ, ref: ref, doc: doc})
	}
	return out
}

// typeName is a field's type as JSON sees it, and the struct it names
// (for a link), if any.
func typeName(e ast.Expr) (string, string) {
	switch x := e.(type) {
	case *ast.Ident:
		switch x.Name {
		case "string", "bool":
			return x.Name, ""
		case "int", "int64", "uint64", "uint32", "uint16", "uint8", "float64", "MTU":
			return "number", ""
		case "GID":
			return "string (GID)", ""
		case "Records":
			return "RecordColumns", "RecordColumns" // its MarshalJSON
		}
		return x.Name, x.Name
	case *ast.StarExpr:
		return typeName(x.X)
	case *ast.ArrayType:
		n, ref := typeName(x.Elt)
		return "[]" + n, ref
	case *ast.MapType:
		k, _ := typeName(x.Key)
		v, ref := typeName(x.Value)
		return "map " + k + " → " + v, ref
	case *ast.SelectorExpr:
		switch x.Sel.Name {
		case "Time":
			return "string (RFC 3339, UTC)", ""
		case "Duration":
			return "number (ns)", ""
		case "GID":
			return "string (GID)", ""
		case "MTU":
			return "number", ""
		}
		return x.Sel.Name, x.Sel.Name
	case *ast.InterfaceType:
		return "any", ""
	}
	return fmt.Sprintf("%T", e), ""
}

// unitOf reads a field's unit from its JSON name's suffix, else from
// its comment.
func unitOf(name, doc string) string {
	for _, u := range []struct{ suffix, unit string }{
		{"_hs_per_sec", "handshakes/s"}, {"_per_sec", "1/s"}, {"_sec", "s"}, {"_ms", "ms"}, {"_us", "µs"},
		{"_ns", "ns"}, {"_bytes", "bytes"}, {"_kib", "KiB"}, {"_mb", "MB"}, {"_mbps", "MB/s"}, {"_cores", "cores"},
		{"_pct", "%"}, {"_percent", "%"},
	} {
		if strings.HasSuffix(name, u.suffix) {
			return u.unit
		}
	}
	if strings.Contains(doc, "0..1") {
		return "fraction"
	}
	return ""
}

func oneLine(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// Every outcome class and message failure class is explained in
// docs/outcomes.md.
func TestDocOutcomes(t *testing.T) {
	b, err := os.ReadFile("../docs/outcomes.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	classes := append(append([]string{}, Outcomes...), TrafficTimeout, TrafficVerify, TrafficPost, TrafficInterrupted,
		FaultUnreachable, FaultConnectionLost, FaultDied, FaultHung, FaultLauncher)
	for _, c := range classes {
		if !strings.Contains(doc, "`"+c+"`") {
			t.Errorf("docs/outcomes.md does not explain the class `%s`", c)
		}
	}
}
