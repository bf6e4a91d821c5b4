/*
 * cfsbench: the syscall-level benchmarks of computerfs's bench package.
 *
 * It is C, not Go, because the Go runtime's preemption signals interrupt
 * blocking system calls, which FUSE turns into INTERRUPT requests and
 * retries; that would disturb what is measured.
 *
 * Usage:
 *   cfsbench create   DIR N          create N empty files in DIR
 *   cfsbench stat     DIR N          create N files (untimed), stat them
 *   cfsbench unlink   DIR N          create N files (untimed), unlink them
 *   cfsbench write    FILE MIB       write MIB MiB in 1 MiB blocks, fsync
 *   cfsbench read     FILE           read FILE sequentially in 1 MiB blocks
 *   cfsbench randread FILE N SEED    read FILE once (untimed, to warm the
 *                                    page cache), then N random aligned
 *                                    4 KiB preads, seeded
 *
 * It prints one line, "COUNT SECONDS", where COUNT is operations (files,
 * reads) or bytes, and SECONDS the wall-clock time of the measured part.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (1 << 20)
#define PAGE 4096

static void die(const char *what, const char *arg) {
	fprintf(stderr, "cfsbench: %s %s: %s\n", what, arg ? arg : "", strerror(errno));
	exit(1);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void report(double count, double t0) {
	double t = now() - t0;
	printf("%.0f %.9f\n", count, t);
}

/* splitmix64: a small seeded generator for data and offsets. */
static uint64_t rng_state;
static uint64_t next_rand(void) {
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static char *file_name(const char *dir, long i) {
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s/f%07ld", dir, i);
	return buf;
}

static void create_files(const char *dir, long n) {
	for (long i = 0; i < n; i++) {
		char *p = file_name(dir, i);
		int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			die("create", p);
		if (close(fd) < 0)
			die("close", p);
	}
}

static void stat_files(const char *dir, long n) {
	struct stat st;
	for (long i = 0; i < n; i++) {
		char *p = file_name(dir, i);
		if (stat(p, &st) < 0)
			die("stat", p);
		if (!S_ISREG(st.st_mode) || st.st_size != 0) {
			errno = EINVAL;
			die("stat: not an empty file:", p);
		}
	}
}

static void unlink_files(const char *dir, long n) {
	for (long i = 0; i < n; i++) {
		char *p = file_name(dir, i);
		if (unlink(p) < 0)
			die("unlink", p);
	}
}

static void write_all(int fd, const char *buf, size_t n, const char *path) {
	while (n > 0) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write", path);
		buf += w;
		n -= w;
	}
}

/* Random data, so that a compressing store gains nothing; every 4 KiB page
 * of every block is stamped with its own number so that no two pages of
 * the file are the same. */
static void do_write(const char *path, long mib) {
	uint64_t *buf = aligned_alloc(PAGE, BLOCK);
	if (!buf)
		die("malloc", NULL);
	rng_state = 42;
	for (size_t i = 0; i < BLOCK / 8; i++)
		buf[i] = next_rand();
	double t0 = now();
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		die("open", path);
	for (long b = 0; b < mib; b++) {
		for (size_t p = 0; p < BLOCK / PAGE; p++)
			buf[p * (PAGE / 8)] = (uint64_t)b * (BLOCK / PAGE) + p;
		write_all(fd, (char *)buf, BLOCK, path);
	}
	if (fsync(fd) < 0)
		die("fsync", path);
	if (close(fd) < 0)
		die("close", path);
	report((double)mib * BLOCK, t0);
}

static long long read_all(int fd, char *buf, const char *path) {
	long long total = 0;
	for (;;) {
		ssize_t r = read(fd, buf, BLOCK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read", path);
		if (r == 0)
			return total;
		total += r;
	}
}

static void do_read(const char *path) {
	char *buf = aligned_alloc(PAGE, BLOCK);
	if (!buf)
		die("malloc", NULL);
	double t0 = now();
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open", path);
	long long total = read_all(fd, buf, path);
	close(fd);
	if (total == 0) {
		errno = EINVAL;
		die("read: empty file", path);
	}
	report((double)total, t0);
}

static void do_randread(const char *path, long n, uint64_t seed) {
	char *buf = aligned_alloc(PAGE, BLOCK);
	if (!buf)
		die("malloc", NULL);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open", path);
	long long size = read_all(fd, buf, path); /* warm the page cache */
	long long pages = size / PAGE;
	if (pages == 0) {
		errno = EINVAL;
		die("randread: file too small", path);
	}
	rng_state = seed;
	double t0 = now();
	for (long i = 0; i < n; i++) {
		off_t off = (off_t)(next_rand() % pages) * PAGE;
		ssize_t r = pread(fd, buf, PAGE, off);
		if (r < 0 && errno == EINTR) {
			i--;
			continue;
		}
		if (r != PAGE)
			die("pread", path);
	}
	report((double)n, t0);
	close(fd);
}

static void usage(void) {
	fprintf(stderr, "usage: cfsbench create|stat|unlink DIR N | write FILE MIB | read FILE | randread FILE N SEED\n");
	exit(2);
}

int main(int argc, char **argv) {
	if (argc < 3)
		usage();
	const char *mode = argv[1], *path = argv[2];
	if (!strcmp(mode, "create") && argc == 4) {
		long n = atol(argv[3]);
		double t0 = now();
		create_files(path, n);
		report(n, t0);
	} else if (!strcmp(mode, "stat") && argc == 4) {
		long n = atol(argv[3]);
		create_files(path, n);
		double t0 = now();
		stat_files(path, n);
		report(n, t0);
	} else if (!strcmp(mode, "unlink") && argc == 4) {
		long n = atol(argv[3]);
		create_files(path, n);
		double t0 = now();
		unlink_files(path, n);
		report(n, t0);
	} else if (!strcmp(mode, "write") && argc == 4) {
		do_write(path, atol(argv[3]));
	} else if (!strcmp(mode, "read") && argc == 3) {
		do_read(path);
	} else if (!strcmp(mode, "randread") && argc == 5) {
		do_randread(path, atol(argv[3]), strtoull(argv[4], NULL, 10));
	} else {
		usage();
	}
	return 0;
}
