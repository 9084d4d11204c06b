package policy

import (
	"maps"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Merge returns parent overlaid by child: lists are appended, maps merged
// key by key, set scalars replace. Nothing the parent protects or denies can
// be removed, since lists only grow. The result's Extends is empty.
func Merge(parent, child Policy) Policy {
	out := clonePolicy(parent)
	offsets := map[string]int{} // slice path -> length in parent
	mergeValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(child), "", offsets)
	out.Extends = ""
	out.Origins = Origins{}
	for k, v := range parent.Origins {
		out.Origins[k] = v
	}
	out.Fields = maps.Clone(parent.Fields)
	for k, v := range child.Origins {
		moved := shiftIndex(k, offsets)
		out.Origins[moved] = v
		if local := child.FieldName(k); local != moved {
			if out.Fields == nil {
				out.Fields = map[string]string{}
			}
			out.Fields[moved] = local
		}
	}
	return out
}

func mergeValue(dst, src reflect.Value, path string, offsets map[string]int) {
	switch src.Kind() {
	case reflect.Struct:
		t := src.Type()
		for i := range t.NumField() {
			name := yamlName(t.Field(i))
			if name == "" {
				continue
			}
			mergeValue(dst.Field(i), src.Field(i), joinPath(path, name), offsets)
		}
	case reflect.Slice:
		if src.Len() == 0 {
			return
		}
		offsets[path] = dst.Len()
		dst.Set(reflect.AppendSlice(dst, src))
	case reflect.Map:
		if src.Len() == 0 {
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeMap(src.Type()))
		}
		for _, k := range src.MapKeys() {
			v := src.MapIndex(k)
			if old := dst.MapIndex(k); old.IsValid() && v.Kind() == reflect.Struct {
				// An entry the parent has too (a tmpfs) merges field by
				// field: a child's /tmp: {size: 1G} keeps the mode.
				merged := reflect.New(v.Type()).Elem()
				merged.Set(old)
				mergeValue(merged, v, path, offsets)
				v = merged
			}
			dst.SetMapIndex(k, v)
		}
	default:
		if !src.IsZero() {
			dst.Set(src)
		}
	}
}

// shiftIndex rewrites "a.b[3].c" to "a.b[3+off].c" when a.b was appended to
// a parent list of length off.
func shiftIndex(key string, offsets map[string]int) string {
	for p, off := range offsets {
		rest, ok := strings.CutPrefix(key, p+"[")
		if !ok {
			continue
		}
		end := strings.IndexByte(rest, ']')
		if n, err := strconv.Atoi(rest[:max(end, 0)]); end > 0 && err == nil {
			return p + "[" + strconv.Itoa(n+off) + "]" + rest[end+1:]
		}
	}
	return key
}

// clonePolicy deep-copies the slices and maps of p so merging never writes
// into a parent that a caller still holds.
func clonePolicy(p Policy) Policy {
	var out Policy
	cloneValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(p))
	return out
}

func cloneValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				cloneValue(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Slice:
		if !src.IsNil() {
			dst.Set(reflect.AppendSlice(reflect.MakeSlice(src.Type(), 0, src.Len()), src))
		}
	case reflect.Map:
		if !src.IsNil() {
			m := reflect.MakeMapWithSize(src.Type(), src.Len())
			for _, k := range src.MapKeys() {
				m.SetMapIndex(k, src.MapIndex(k))
			}
			dst.Set(m)
		}
	default:
		dst.Set(src)
	}
}

// yamlName is a field's YAML key, or "" for fields that are not decoded.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// mapFields lists the paths of map-typed fields, whose keys are user data.
// Made on first use: every launch pays for what a package's init does.
var mapFields = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			switch f.Type.Kind() {
			case reflect.Struct:
				walk(f.Type, joinPath(path, name))
			case reflect.Map:
				out[joinPath(path, name)] = true
			}
		}
	}
	walk(reflect.TypeFor[Policy](), "")
	return out
})
