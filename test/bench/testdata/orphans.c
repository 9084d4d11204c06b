/*
 * orphans N [WAVE]: the workload of BenchmarkReaping. Run as the child of
 * the init under test, as PID 1 of a fresh pid namespace, it makes
 * double-forked orphans — each intermediate exits at once, so its child is
 * re-parented to PID 1 — in waves of WAVE (default N) that wait on one
 * pipe. It closes the pipe: the wave exits together, and PID 1 must reap
 * it; the wave is over when /proc lists only PID 1 and this process. When
 * all N are reaped it prints
 *
 *     N SECONDS INIT_UTIME_TICKS INIT_STIME_TICKS
 *
 * SECONDS sums the waves from release to the last zombie reaped; the ticks
 * are PID 1's own CPU time (proc_pid_stat(5) fields 14 and 15), spent on
 * reaping alone: PID 1 has nothing to do while the orphans wait.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int processes(void) {
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
			n++;
	closedir(d);
	return n;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int wave = argc > 2 ? atoi(argv[2]) : n;
	double secs = 0;
	for (int done = 0; done < n; done += wave) {
		int fds[2];
		if (pipe(fds) < 0) {
			perror("pipe");
			return 1;
		}
		for (int i = 0; i < wave && done + i < n; i++) {
			pid_t p = fork();
			if (p < 0) {
				perror("fork");
				return 1;
			}
			if (p == 0) {
				if (fork() == 0) {
					char c;
					close(fds[1]);
					while (read(fds[0], &c, 1) > 0)
						;
				}
				_exit(0);
			}
			waitpid(p, NULL, 0);
		}
		close(fds[0]);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		close(fds[1]);
		while (processes() > 2)
			usleep(100);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs += (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	}
	unsigned long ut = 0, st = 0;
	FILE *f = fopen("/proc/1/stat", "r");
	char buf[1024];
	size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
	buf[len] = 0;
	char *p = strrchr(buf, ')'); /* comm may hold spaces */
	if (p)
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
	printf("%d %.6f %lu %lu\n", n, secs, ut, st);
	return 0;
}
