package mounts

import "path"

// globalConfigs protects what git reads for every repository from each
// home (the operator's, the run user's) that lies in a writable root: the
// user's configuration, ~/.gitconfig and ~/.config/git/config (config.c,
// git_global_config; $XDG_CONFIG_HOME is not followed), every file they
// include, and the hooks and fsmonitor command they name (gitState.global,
// applied to every work tree by top). The tier profiles protect
// .gitconfig by name at a root; a home deeper in a root, its XDG file and
// its includes (`[include] path = ~/.gitconfig.local`) were the agent's.
func (f *finder) globalConfigs() {
	for _, h := range f.homes {
		if !underAny(h, f.roots) {
			continue
		}
		for _, p := range []string{path.Join(h, ".gitconfig"), path.Join(h, ".config/git/config")} {
			f.protect(p)
			if t, err := resolve(f.d, p); err == nil {
				f.git.global = append(f.git.global, f.config(t, 0)...)
			}
		}
	}
}
