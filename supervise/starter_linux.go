package supervise

import "runtime"

// starter is the thread bwrap is started from. bwrap's --die-with-parent
// is PR_SET_PDEATHSIG, which fires when the thread that forked bwrap
// exits, not the process (go.dev/issue/27505, prctl(2)), so that thread
// must outlive bwrap. A goroutine of its own is locked to it and never
// unlocked: it runs the caller's setup there (Spec.OnStarter: the run's
// private mount namespace, which bwrap then inherits), starts bwrap when
// asked, and ends, taking its thread along, once the run is over. The
// supervisor's own loop runs on ordinary goroutines, so no event is handed
// to a locked thread.
type starter struct {
	jobs chan func()
	done chan struct{}
}

// newStarter starts the thread and runs setup on it; setup's error is
// returned once it has run.
func newStarter(setup func() error) (*starter, error) {
	s := &starter{jobs: make(chan func()), done: make(chan struct{})}
	errs := make(chan error, 1)
	go func() {
		defer close(s.done)
		runtime.LockOSThread() // for good: the thread ends with the goroutine
		var err error
		if setup != nil {
			err = setup()
		}
		errs <- err
		for job := range s.jobs {
			job()
		}
	}()
	return s, <-errs
}

// do runs f on the starter's thread and waits for it.
func (s *starter) do(f func()) {
	ran := make(chan struct{})
	s.jobs <- func() { f(); close(ran) }
	<-ran
}

// stop ends the thread: call it once bwrap is gone.
func (s *starter) stop() {
	close(s.jobs)
	<-s.done
}
