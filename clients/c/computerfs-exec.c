/*
 * computerfs-exec, in C: `computerfs exec` for harnesses that run many
 * short commands, where the Go client's own start (2-3 ms: the runtime's
 * threads) is as long as `bash -c true`. It speaks the exec call of the
 * control socket as internal/execwire's client does (an HTTP/1.0 POST of
 * the request's JSON, then one JSON event a line until the result) and
 * answers as the Go computerfs-exec does: the same flags, output,
 * messages and exit status (cmd/computerfs/cexec_test.go compares them).
 * It needs the C library and nothing else; see docs/exec-client.md.
 *
 * The daemon's answer is parsed strictly and within bounds: 64 KiB for a
 * line of the HTTP head, 32 MiB for a line of events (execwire.MaxRequest),
 * 10,000 levels of nesting, sizes checked before they are added. What is
 * not what the daemon sends is an error (exit 1), as in the Go client; the
 * message's detail may differ from the Go client's for such an answer.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "printable.h"

#define MAX_STDIN (16 << 20)   /* the most standard input passed on; more is refused */
#define MAX_HEAD (64 << 10)    /* a line of the answer's head, and a refusal's text */
#define MAX_LINE (32 << 20)    /* a line of events: execwire.MaxRequest */
#define MAX_DEPTH 10000        /* JSON nesting, as Go's encoding/json */
#define MAX_SOCKET_PATH 107    /* sun_path without its NUL */

/* ---- growable byte buffers ---- */

struct buf {
	char *p;
	size_t n, cap;
};

static void oom(void)
{
	static const char msg[] = "computerfs exec: out of memory\n";
	if (write(2, msg, sizeof msg - 1) < 0) {
	}
	exit(1);
}

static void buf_need(struct buf *b, size_t more)
{
	if (more > SIZE_MAX / 2 - b->n)
		oom();
	if (b->n + more <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < b->n + more)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		oom();
	b->p = p;
	b->cap = cap;
}

static void buf_add(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	buf_need(b, n);
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void buf_addc(struct buf *b, char c) { buf_add(b, &c, 1); }
static void buf_adds(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

static void buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	char probe[1];
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(probe, sizeof probe, fmt, ap);
	if (n < 0)
		oom();
	buf_need(b, (size_t)n + 1);
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, again);
	va_end(again);
	b->n += (size_t)n;
}

__attribute__((format(printf, 2, 3))) static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

/* buf_str returns b's bytes as a C string (b holds no NUL when used so). */
static const char *buf_str(struct buf *b)
{
	buf_need(b, 1);
	b->p[b->n] = 0;
	return b->p;
}

/* ---- errors: the message of the error that ends the run ---- */

enum { E_RUN = 1, E_USAGE = 2 };

static struct buf emsg;  /* the message, as the Go client's err.Error() */
static int ebroken;      /* a connection that broke off: execwire.BrokenConn */

__attribute__((format(printf, 2, 3))) static int fail(int broken, const char *fmt, ...)
{
	va_list ap;
	emsg.n = 0;
	va_start(ap, fmt);
	buf_vprintf(&emsg, fmt, ap);
	va_end(ap);
	ebroken = broken;
	return -1;
}

/* errstr is Go's text of errno e: the C library's, lower-cased first. */
static const char *errstr(int e)
{
	static char s[256];
	snprintf(s, sizeof s, "%s", strerror(e));
	if (s[0] >= 'A' && s[0] <= 'Z' && !(s[1] >= 'A' && s[1] <= 'Z'))
		s[0] += 'a' - 'A';
	return s;
}

/* ---- UTF-8 and the quoting of messages (Go's textsafe.Text, strconv.Quote) ---- */

/* decode decodes the rune at s (n > 0 bytes) as Go's utf8.DecodeRune:
 * an invalid or short sequence is 0xFFFD of width 1. */
static unsigned int decode(const unsigned char *s, size_t n, size_t *w)
{
	unsigned int c = s[0];
	*w = 1;
	if (c < 0x80)
		return c;
	size_t need;
	unsigned int r, min;
	if (c >= 0xC2 && c <= 0xDF)
		need = 2, r = c & 0x1F, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		need = 3, r = c & 0x0F, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		need = 4, r = c & 0x07, min = 0x10000;
	else
		return 0xFFFD;
	if (n < need)
		return 0xFFFD;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0xFFFD;
		r = r << 6 | (s[i] & 0x3F);
	}
	if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF))
		return 0xFFFD;
	*w = need;
	return r;
}

static void encode(struct buf *b, unsigned int r)
{
	char s[4];
	if (r < 0x80) {
		buf_addc(b, (char)r);
	} else if (r < 0x800) {
		s[0] = (char)(0xC0 | r >> 6), s[1] = (char)(0x80 | (r & 0x3F));
		buf_add(b, s, 2);
	} else if (r < 0x10000) {
		s[0] = (char)(0xE0 | r >> 12), s[1] = (char)(0x80 | (r >> 6 & 0x3F)), s[2] = (char)(0x80 | (r & 0x3F));
		buf_add(b, s, 3);
	} else {
		s[0] = (char)(0xF0 | r >> 18), s[1] = (char)(0x80 | (r >> 12 & 0x3F));
		s[2] = (char)(0x80 | (r >> 6 & 0x3F)), s[3] = (char)(0x80 | (r & 0x3F));
		buf_add(b, s, 4);
	}
}

/* printable: a rune from U+0080 up that is shown as it is. */
static int printable_rune(unsigned int r)
{
	size_t lo = 0, hi = sizeof printable / sizeof printable[0];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r < printable[mid][0])
			hi = mid;
		else if (r > printable[mid][1])
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

/* escape_rune appends Go's escape of rune r (strconv's, ASCII only). */
static void escape_rune(struct buf *b, unsigned int r)
{
	static const char esc[] = "\aa\bb\ff\nn\rr\tt\vv";
	for (const char *e = esc; *e; e += 2)
		if ((unsigned int)e[0] == r) {
			buf_addc(b, '\\');
			buf_addc(b, e[1]);
			return;
		}
	if (r < 0x20 || r == 0x7F)
		buf_printf(b, "\\x%02x", r);
	else if (r < 0x10000)
		buf_printf(b, "\\u%04x", r);
	else
		buf_printf(b, "\\U%08x", r);
}

/* text appends s as Go's textsafe.Text shows it: control, format, space
 * (but ' ') characters and invalid bytes escaped, so that a message
 * cannot move the terminal's cursor or pass for another line. */
static void text(struct buf *b, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	for (size_t i = 0; i < n;) {
		size_t w;
		unsigned int r = decode(s + i, n - i, &w);
		if (r == 0xFFFD && w == 1)
			buf_printf(b, "\\x%02x", s[i]);
		else if ((r >= 0x20 && r < 0x7F) || (r >= 0x80 && r != 0xFFFD && printable_rune(r)))
			buf_add(b, s + i, w);
		else
			escape_rune(b, r);
		i += w;
	}
}

/* quote appends Go's strconv.Quote of s (%q). */
static void quote(struct buf *b, const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	buf_addc(b, '"');
	for (size_t i = 0; i < n;) {
		size_t w;
		unsigned int r = decode(s + i, n - i, &w);
		if (r == 0xFFFD && w == 1)
			buf_printf(b, "\\x%02x", s[i]);
		else if (r == '"' || r == '\\')
			buf_addc(b, '\\'), buf_addc(b, (char)r);
		else if ((r >= 0x20 && r < 0x7F) || (r >= 0x80 && printable_rune(r)))
			buf_add(b, s + i, w);
		else
			escape_rune(b, r);
		i += w;
	}
	buf_addc(b, '"');
}

/* space_at tells whether a Unicode space (Go's unicode.IsSpace) starts at
 * s, and its width. */
static int space_at(const unsigned char *s, size_t n, size_t *w)
{
	unsigned int r = decode(s, n, w);
	switch (r) {
	case '\t': case '\n': case '\v': case '\f': case '\r': case ' ':
	case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
	case 0x202F: case 0x205F: case 0x3000:
		return 1;
	}
	return r >= 0x2000 && r <= 0x200A;
}

/* trim_space trims Unicode spaces from both ends of p[0:*n] (Go's
 * strings.TrimSpace) and returns the start. */
static const char *trim_space(const char *p, size_t *n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, end = *n, w;
	while (i < end && space_at(s + i, end - i, &w))
		i += w;
	while (end > i) {
		/* The last rune, as Go's utf8.DecodeLastRune finds it. */
		size_t k = end - 1;
		while (k > i && end - k < 4 && (s[k] & 0xC0) == 0x80)
			k--;
		decode(s + k, end - k, &w);
		if (k + w != end)
			k = end - 1;
		if (!space_at(s + k, end - k, &w))
			break;
		end = k;
	}
	*n = end - i;
	return p + i;
}

/* ---- paths (Go's path/filepath, lexically) ---- */

/* clean returns Go's filepath.Clean of p, malloc'd. */
static char *clean(const char *p)
{
	size_t n = strlen(p);
	if (n == 0)
		return strdup(".");
	char *out = malloc(n + 2);
	if (!out)
		oom();
	int rooted = p[0] == '/';
	size_t r = 0, w = 0, dotdot = 0;
	if (rooted)
		out[w++] = '/', r = 1, dotdot = 1;
	while (r < n) {
		if (p[r] == '/') {
			r++;
		} else if (p[r] == '.' && (r + 1 == n || p[r + 1] == '/')) {
			r++;
		} else if (p[r] == '.' && p[r + 1] == '.' && (r + 2 == n || p[r + 2] == '/')) {
			r += 2;
			if (w > dotdot) {
				w--;
				while (w > dotdot && out[w] != '/')
					w--;
			} else if (!rooted) {
				if (w > 0)
					out[w++] = '/';
				out[w++] = '.', out[w++] = '.';
				dotdot = w;
			}
		} else {
			if ((rooted && w != 1) || (!rooted && w != 0))
				out[w++] = '/';
			for (; r < n && p[r] != '/'; r++)
				out[w++] = p[r];
		}
	}
	if (w == 0)
		out[w++] = '.';
	out[w] = 0;
	return out;
}

static char *join2(const char *a, const char *b)
{
	if (!*a)
		return clean(b);
	size_t na = strlen(a), nb = strlen(b);
	char *s = malloc(na + nb + 2);
	if (!s)
		oom();
	memcpy(s, a, na);
	s[na] = '/';
	memcpy(s + na + 1, b, nb + 1);
	char *c = clean(s);
	free(s);
	return c;
}

/* getwd is Go's os.Getwd: $PWD if it names the working directory. */
static char *getwd_go(void)
{
	struct stat dot, st;
	if (stat(".", &dot) < 0)
		return NULL;
	const char *pwd = getenv("PWD");
	if (pwd && pwd[0] == '/' && stat(pwd, &st) == 0 && st.st_dev == dot.st_dev && st.st_ino == dot.st_ino)
		return strdup(pwd);
	return getcwd(NULL, 0);
}

/* absolute is Go's filepath.Abs. */
static char *absolute(const char *p)
{
	if (p[0] == '/')
		return clean(p);
	char *wd = getwd_go();
	if (!wd) {
		fail(0, "getwd: %s", errstr(errno));
		return NULL;
	}
	char *a = join2(wd, p);
	free(wd);
	return a;
}

/* read_file reads a whole file of up to max bytes (more is an error). */
static int read_file(const char *path, struct buf *b, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		buf_need(b, 4096);
		ssize_t n = read(fd, b->p + b->n, b->cap - b->n);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || b->n + (size_t)n > max) {
			int e = n < 0 ? errno : EFBIG;
			close(fd);
			if (n == 0)
				return 0;
			errno = e;
			return -1;
		}
		b->n += (size_t)n;
	}
}

/* ---- the workspace: mountinfo, the store, the daemon's pid ---- */

/* unescape undoes mountinfo's octal escapes in place (as mountinfo.unescape). */
static size_t unescape(char *s, size_t n)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 3 < n) {
			unsigned char v = 0;
			int ok = 1;
			for (size_t k = i + 1; k < i + 4; k++) {
				if (s[k] < '0' || s[k] > '7') {
					ok = 0;
					break;
				}
				v = (unsigned char)(v * 8 + (s[k] - '0'));
			}
			if (ok) {
				s[w++] = (char)v;
				i += 3;
				continue;
			}
		}
		s[w++] = s[i];
	}
	return w;
}

struct field {
	char *p;
	size_t n;
};

#define MAX_FIELDS 64

/* fields splits line at Unicode spaces (Go's strings.Fields), up to max. */
static size_t fields(char *line, size_t n, struct field *f, size_t max)
{
	const unsigned char *s = (const unsigned char *)line;
	size_t nf = 0, i = 0, w;
	while (i < n) {
		while (i < n && space_at(s + i, n - i, &w))
			i += w;
		if (i >= n)
			break;
		size_t start = i;
		while (i < n && !space_at(s + i, n - i, &w))
			i += w;  /* space_at gave the rune's width */
		if (nf < max)
			f[nf].p = line + start, f[nf].n = i - start;
		nf++;
	}
	return nf;
}

/* mounted_store finds the store of the computerfs mount at mp (absolute),
 * as execwire.MountedStore. */
static char *mounted_store(const char *mp)
{
	char *abs = clean(mp);
	char *real = realpath(abs, NULL);
	if (real) {
		free(abs);
		abs = real;
	}
	struct buf mi = {0};
	if (read_file("/proc/self/mountinfo", &mi, 64 << 20) < 0) {
		fail(0, "open /proc/self/mountinfo: %s", errstr(errno));
		return NULL;
	}
	int ok = 0;
	struct buf fstype = {0}, source = {0};
	size_t alen = strlen(abs);
	for (size_t i = 0; i < mi.n;) {
		char *line = mi.p + i;
		char *nl = memchr(line, '\n', mi.n - i);
		size_t n = nl ? (size_t)(nl - line) : mi.n - i;
		i += n + 1;
		struct field f[MAX_FIELDS];
		size_t nf = fields(line, n, f, MAX_FIELDS);
		if (nf > MAX_FIELDS)
			nf = MAX_FIELDS;  /* a mount point's line has a dozen */
		if (nf < 5)
			continue;
		f[4].n = unescape(f[4].p, f[4].n);
		if (f[4].n != alen || memcmp(f[4].p, abs, alen) != 0)
			continue;
		for (size_t k = 6; k + 2 < nf; k++) {
			if (f[k].n == 1 && f[k].p[0] == '-') {
				fstype.n = source.n = 0;
				buf_add(&fstype, f[k + 1].p, f[k + 1].n);
				f[k + 2].n = unescape(f[k + 2].p, f[k + 2].n);
				buf_add(&source, f[k + 2].p, f[k + 2].n);
				break;
			}
		}
		ok = 1;
	}
	free(abs);
	free(mi.p);
	if (!ok) {
		fail(0, "%s is not mounted", mp);
		return NULL;
	}
	const char *fs = buf_str(&fstype), *src = buf_str(&source);
	if (strncmp(fs, "fuse", 4) != 0 || strncmp(src, "computerfs:", 11) != 0 || strlen(src) != source.n) {
		emsg.n = 0;
		buf_printf(&emsg, "%s is not a computerfs mount (", mp);
		buf_add(&emsg, fstype.p, fstype.n);
		buf_adds(&emsg, " from ");
		buf_add(&emsg, source.p, source.n);
		buf_adds(&emsg, ")");
		ebroken = 0;
		return NULL;
	}
	char *store = strdup(src + 11);
	free(fstype.p);
	free(source.p);
	if (!store)
		oom();
	return store;
}

/* go_atoi is strconv.Atoi: an optional sign and decimal digits in range. */
static int go_atoi(const char *s, size_t n, long long *v)
{
	size_t i = 0;
	int neg = 0;
	if (n > 0 && (s[0] == '+' || s[0] == '-'))
		neg = s[0] == '-', i = 1;
	if (i == n)
		return -1;
	unsigned long long u = 0, lim = neg ? (unsigned long long)LLONG_MAX + 1 : LLONG_MAX;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		unsigned d = (unsigned)(s[i] - '0');
		if (u > (lim - d) / 10)
			return -1;
		u = u * 10 + d;
	}
	*v = neg ? (long long)(0 - u) : (long long)u;
	return 0;
}

/* store_pid is the pid in the store's lock file, or 0 (execwire.StorePid). */
static long long store_pid(const char *store)
{
	char *path = join2(store, "lock");
	struct buf b = {0};
	int r = read_file(path, &b, 1 << 20);
	free(path);
	if (r < 0) {
		free(b.p);
		return 0;
	}
	size_t n = b.n;
	const char *s = trim_space(b.p ? b.p : "", &n);
	long long pid;
	if (go_atoi(s, n, &pid) < 0)
		pid = 0;
	free(b.p);
	return pid;
}

/* running is proc.Running: some thread of pid has not exited. */
static int running(long long pid)
{
	char path[64];
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%lld/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	int alive = 0;
	struct dirent *e;
	while (!alive && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char stat[512];
		snprintf(stat, sizeof stat, "%s/%s/stat", path, e->d_name);
		struct buf b = {0};
		if (read_file(stat, &b, 1 << 16) == 0) {
			char *paren = b.n ? memrchr(b.p, ')', b.n) : NULL;
			size_t i = paren ? (size_t)(paren - b.p) : 0;
			alive = !paren || i + 2 >= b.n || (b.p[i + 2] != 'Z' && b.p[i + 2] != 'X');
		}
		free(b.p);
	}
	closedir(d);
	return alive;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ended is execwire.Ended: pid has ended, or does within a second. */
static int ended(long long pid)
{
	double deadline = now() + 1;
	while (running(pid)) {
		if (now() > deadline)
			return 0;
		struct timespec ten = {0, 10 * 1000 * 1000};
		nanosleep(&ten, NULL);
	}
	return 1;
}

/* shell_quote appends execwire.ShellQuote(s). */
static void shell_quote(struct buf *b, const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%=,";
	if (*s && strspn(s, safe) == strlen(s)) {
		buf_adds(b, s);
		return;
	}
	buf_addc(b, '\'');
	for (; *s; s++)
		if (*s == '\'')
			buf_adds(b, "'\\''");
		else
			buf_addc(b, *s);
	buf_addc(b, '\'');
}

/* The workspace that the call goes to. */
static char *mp, *store;
static long long daemon_pid;  /* from the lock file when the call began */

/* daemon_gone makes the error execwire.DaemonGoneError says. */
static int daemon_gone(long long pid, int alive)
{
	emsg.n = 0;
	ebroken = 0;
	buf_printf(&emsg, "the daemon for %s", mp);
	if (pid > 0)
		buf_printf(&emsg, ", pid %lld,", pid);
	struct buf remedy = {0};
	buf_adds(&remedy, "run computerfs mount --store ");
	shell_quote(&remedy, store);
	buf_addc(&remedy, ' ');
	shell_quote(&remedy, mp);
	if (alive)
		buf_adds(&emsg, " does not answer on its control socket: if it is not ending, unmount the workspace and ");
	else
		buf_adds(&emsg, " is gone: ");
	buf_add(&emsg, remedy.p, remedy.n);
	free(remedy.p);
	return -1;
}

/* gone is execwire.Gone for a failure with errno e to reach the socket:
 * the daemon is gone if the socket is refused or missing. */
static int gone(int e)
{
	if (e != ECONNREFUSED && e != ENOENT)
		return 0;
	long long pid = store_pid(store);
	daemon_gone(pid, pid > 0 && !ended(pid));
	return 1;
}

/* lost is execwire.Lost for the error set: a connection that broke off
 * because its daemon ended says that the daemon is gone. */
static int lost(void)
{
	if (daemon_pid > 0 && ebroken && ended(daemon_pid))
		daemon_gone(daemon_pid, 0);
	return -1;
}

/* ---- the connection ---- */

static volatile sig_atomic_t canceled;
static volatile int sock = -1;

static void on_signal(int sig)
{
	(void)sig;
	int e = errno;
	canceled = 1;
	if (sock >= 0)
		shutdown(sock, SHUT_RDWR);
	errno = e;
}

/* dial connects to the store's control socket (execwire's Dial). */
static int dial(void)
{
	char *path = join2(store, "control.sock");
	struct stat st;
	if (stat(path, &st) < 0) {
		int e = errno;
		if (!gone(e))
			fail(0, "workspace at %s: no control socket (stat %s: %s)", mp, path, errstr(e));
		free(path);
		return -1;
	}
	daemon_pid = store_pid(store);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int dirfd = -1, r = -1;
	if (strlen(path) <= MAX_SOCKET_PATH) {
		memcpy(sa.sun_path, path, strlen(path));
	} else {
		char *slash = strrchr(path, '/');  /* path is store/control.sock */
		*slash = 0;
		char *dir = clean(*path ? path : "/");
		*slash = '/';
		dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dirfd < 0) {
			int e = errno;
			if (!gone(e))
				fail(0, "control socket: open %s: %s", dir, errstr(e)), lost();
			free(dir);
			goto out;
		}
		free(dir);
		int n = snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dirfd, slash + 1);
		if (n < 0 || n > MAX_SOCKET_PATH) {
			fail(0, "control socket: socket path %s: name too long", path);
			goto out;
		}
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fail(0, "control socket: socket: %s", errstr(errno));
		goto out;
	}
	while ((r = connect(fd, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR) {
	}
	if (r < 0) {
		int e = errno;
		close(fd);
		if (!gone(e)) {
			fail(e == ECONNRESET || e == EPIPE, "control socket: dial unix %s: connect: %s", sa.sun_path, errstr(e));
			lost();
		}
		goto out;
	}
	sock = fd;
out:
	if (dirfd >= 0)
		close(dirfd);
	free(path);
	return r < 0 ? -1 : 0;
}

/* send_all writes the request on the socket; no SIGPIPE for the socket. */
static int send_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = send(sock, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR && !canceled)
			continue;
		if (k < 0) {
			int e = errno;
			return fail(e == EPIPE || e == ECONNRESET, "control socket: write: %s", errstr(e)), lost();
		}
		p += k, n -= (size_t)k;
	}
	return 0;
}

/* out writes to fd 1 or 2, as Go's os.File.Write (whose errors the Go
 * client does not check: nor does this one). A broken pipe kills the
 * process with SIGPIPE, as it does a Go program on fd 1 and 2. */
static void out(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			poll(&pf, 1, -1);
			continue;
		}
		if (k <= 0)
			return;
		p += k, n -= (size_t)k;
	}
}

/* The answer, read through one buffer. rd.p[rd.off:rd.n] is unread. */
static struct buf rd;
static size_t rd_off;
static int rd_eof, rd_err;  /* the connection ended; errno of a failed read */

/* fill reads more of the answer into rd, keeping it under max bytes
 * (unread ones moved to the front). 0 when nothing more comes. */
static int fill(size_t max)
{
	if (rd_eof || rd_err)
		return 0;
	if (rd_off > 0) {
		memmove(rd.p, rd.p + rd_off, rd.n - rd_off);
		rd.n -= rd_off;
		rd_off = 0;
	}
	if (rd.n >= max)
		return 0;
	size_t want = rd.cap - rd.n;
	if (want < 64 << 10) {
		size_t grow = rd.cap < (64 << 10) ? (64 << 10) : rd.cap;
		if (grow > max - rd.n)
			grow = max - rd.n;
		buf_need(&rd, grow);
		want = rd.cap - rd.n;
	}
	if (want > max - rd.n)
		want = max - rd.n;
	for (;;) {
		ssize_t k = read(sock, rd.p + rd.n, want);
		if (k < 0 && errno == EINTR && !canceled)
			continue;
		if (k < 0) {
			rd_err = errno;
			return 0;
		}
		if (k == 0) {
			rd_eof = 1;
			return 0;
		}
		rd.n += (size_t)k;
		return 1;
	}
}

/* read_error sets the error of a read that failed, with prefix. */
static int read_error(const char *prefix)
{
	int e = rd_err;
	return fail(e == ECONNRESET || e == EPIPE, "%sread: %s", prefix, errstr(e)), lost();
}

/* head_line reads a line of the head (bufio.Reader.ReadSlice over 64 KiB)
 * and returns it without its trailing CRs and LFs. */
static int head_line(const char **line, size_t *len)
{
	size_t scanned = 0;
	for (;;) {
		char *nl = memchr(rd.p + rd_off + scanned, '\n', rd.n - rd_off - scanned);
		if (nl) {
			*line = rd.p + rd_off;
			size_t n = (size_t)(nl - *line) + 1;
			rd_off += n;
			while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
				n--;
			*len = n;
			return 0;
		}
		scanned = rd.n - rd_off;
		if (scanned >= MAX_HEAD)
			return fail(0, "control socket: bufio: buffer full"), lost();
		if (!fill(MAX_HEAD)) {
			if (rd_err)
				return read_error("control socket: ");
			return fail(1, "control socket: unexpected EOF"), lost();
		}
	}
}

/* read_head reads the status line and headers and returns the status. */
static int read_head(long long *status)
{
	const char *line;
	size_t n;
	if (head_line(&line, &n) < 0)
		return -1;
	const char *sp = memchr(line, ' ', n);
	size_t plen = sp ? (size_t)(sp - line) : n;
	const char *code = sp ? sp + 1 : line + n;
	size_t rest = n - (size_t)(code - line);
	const char *sp2 = memchr(code, ' ', rest);
	size_t clen = sp2 ? (size_t)(sp2 - code) : rest;
	if (plen < 7 || memcmp(line, "HTTP/1.", 7) != 0 || go_atoi(code, clen, status) < 0 || clen != 3) {
		emsg.n = 0;
		ebroken = 0;
		buf_adds(&emsg, "control socket: malformed answer ");
		quote(&emsg, line, n);
		return -1;
	}
	for (int k = 0;; k++) {
		if (head_line(&line, &n) < 0)
			return -1;
		if (n == 0)
			return 0;
		if (k == 100)
			return fail(0, "control socket: malformed answer: too many header lines"), lost();
	}
}

/* ---- the events: a strict JSON parser for execwire.Event ---- */

struct result {
	long long exit_code, duration_ms, peak_memory, cpu_time_ms;
	struct buf backend, why, stopped, request;
	int truncated, warm;
};

struct event {
	int has_out, has_err, has_result;
	struct buf out, err, error;
	struct result result;
};

struct parser {
	const char *p, *end;
	const char *bad;      /* where the syntax went wrong; NULL if it did not */
	const char *typeerr;  /* the first value of the wrong type, if any */
	int depth;
	struct buf tmp;       /* a decoded key or string */
};

static void ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int syntax(struct parser *ps)
{
	if (!ps->bad)
		ps->bad = ps->p;
	return -1;
}

static int hex4(const char *p, const char *end)
{
	if (end - p < 4)
		return -1;
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* string parses a JSON string at ps->p into out (if not NULL) as Go
 * decodes it: invalid UTF-8 and lone surrogates become U+FFFD. */
static int string(struct parser *ps, struct buf *out)
{
	if (ps->p >= ps->end || *ps->p != '"')
		return syntax(ps);
	ps->p++;
	for (;;) {
		const char *start = ps->p;
		while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20 &&
		       (unsigned char)*ps->p < 0x80)
			ps->p++;
		if (out)
			buf_add(out, start, (size_t)(ps->p - start));
		if (ps->p >= ps->end)
			return syntax(ps);
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			return 0;
		}
		if (c < 0x20)
			return syntax(ps);
		if (c >= 0x80) {
			size_t w;
			unsigned int r = decode((const unsigned char *)ps->p, (size_t)(ps->end - ps->p), &w);
			if (out) {
				if (r == 0xFFFD && w == 1)
					encode(out, 0xFFFD);
				else
					buf_add(out, ps->p, w);
			}
			ps->p += w;
			continue;
		}
		/* a backslash */
		if (ps->end - ps->p < 2)
			return ps->p = ps->end, syntax(ps);
		char e = ps->p[1];
		const char *simple = strchr("\"\\/bfnrt", e);
		if (e && simple) {
			static const char to[] = "\"\\/\b\f\n\r\t";
			if (out)
				buf_addc(out, to[simple - "\"\\/bfnrt"]);
			ps->p += 2;
			continue;
		}
		if (e != 'u')
			return ps->p++, syntax(ps);
		int r = hex4(ps->p + 2, ps->end);
		if (r < 0)
			return ps->p += 2, syntax(ps);
		ps->p += 6;
		unsigned int rune = (unsigned int)r;
		if (rune >= 0xD800 && rune < 0xE000) {
			int r2 = -1;
			if (ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u')
				r2 = hex4(ps->p + 2, ps->end);
			if (rune < 0xDC00 && r2 >= 0xDC00 && r2 < 0xE000) {
				rune = 0x10000 + ((rune - 0xD800) << 10) + ((unsigned int)r2 - 0xDC00);
				ps->p += 6;
			} else {
				rune = 0xFFFD;
			}
		}
		if (out)
			encode(out, rune);
	}
}

/* number checks a JSON number's syntax and returns its text's length. */
static int number(struct parser *ps, size_t *len)
{
	const char *s = ps->p, *e = ps->end, *p = s;
	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0')
		p++;
	else if (p < e && *p >= '1' && *p <= '9')
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	else
		return ps->p = p, syntax(ps);
	if (p < e && *p == '.') {
		p++;
		if (p >= e || *p < '0' || *p > '9')
			return ps->p = p, syntax(ps);
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		if (p >= e || *p < '0' || *p > '9')
			return ps->p = p, syntax(ps);
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	*len = (size_t)(p - s);
	ps->p = p;
	return 0;
}

static int literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	for (size_t i = 0; i < n; i++)
		if (ps->p + i >= ps->end || ps->p[i] != word[i])
			return ps->p += i, syntax(ps);
	ps->p += n;
	return 0;
}

static int value(struct parser *ps);

/* members parses an object's members after its '{', calling member for
 * each key (decoded into ps->tmp) with ps->p at its value. */
static int members(struct parser *ps, int (*member)(struct parser *, void *), void *arg)
{
	if (++ps->depth > MAX_DEPTH)
		return syntax(ps);
	ws(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		ps->depth--;
		return 0;
	}
	for (;;) {
		ws(ps);
		ps->tmp.n = 0;
		if (string(ps, &ps->tmp) < 0)
			return -1;
		ws(ps);
		if (ps->p >= ps->end || *ps->p != ':')
			return syntax(ps);
		ps->p++;
		ws(ps);
		if ((member ? member(ps, arg) : value(ps)) < 0)
			return -1;
		ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == '}') {
			ps->p++;
			ps->depth--;
			return 0;
		}
		return syntax(ps);
	}
}

/* value parses (and drops) any JSON value. */
static int value(struct parser *ps)
{
	size_t n;
	if (ps->p >= ps->end)
		return syntax(ps);
	switch (*ps->p) {
	case '{':
		ps->p++;
		return members(ps, NULL, NULL);
	case '[':
		ps->p++;
		if (++ps->depth > MAX_DEPTH)
			return syntax(ps);
		ws(ps);
		if (ps->p < ps->end && *ps->p == ']') {
			ps->p++;
			ps->depth--;
			return 0;
		}
		for (;;) {
			ws(ps);
			if (value(ps) < 0)
				return -1;
			ws(ps);
			if (ps->p < ps->end && *ps->p == ',') {
				ps->p++;
				continue;
			}
			if (ps->p < ps->end && *ps->p == ']') {
				ps->p++;
				ps->depth--;
				return 0;
			}
			return syntax(ps);
		}
	case '"':
		return string(ps, NULL);
	case 't':
		return literal(ps, "true");
	case 'f':
		return literal(ps, "false");
	case 'n':
		return literal(ps, "null");
	}
	return number(ps, &n);
}

/* wrong notes a value of the wrong type for its field and skips it. */
static int wrong(struct parser *ps)
{
	if (!ps->typeerr)
		ps->typeerr = ps->p;
	return value(ps);
}

static int is_null(struct parser *ps)
{
	if (ps->p < ps->end && *ps->p == 'n')
		return literal(ps, "null") < 0 ? -1 : 1;
	return 0;
}

/* key_is tells whether the decoded key matches a field's name as Go's
 * encoding/json matches them: without regard to case, where 'ſ' (U+017F)
 * is an s and the Kelvin sign (U+212A) a k. */
static int key_is(const struct buf *k, const char *name)
{
	size_t i = 0;
	for (; *name; name++) {
		if (i >= k->n)
			return 0;
		unsigned char c = (unsigned char)k->p[i];
		if (c < 0x80) {
			if ((c | 0x20) != *name && c != *name)
				return 0;
			i++;
			continue;
		}
		size_t w;
		unsigned int r = decode((const unsigned char *)k->p + i, k->n - i, &w);
		if (!((r == 0x17F && *name == 's') || (r == 0x212A && *name == 'k')))
			return 0;
		i += w;
	}
	return i == k->n;
}

/* int_field parses an integer field (Go's int64: no fraction, no exponent). */
static int int_field(struct parser *ps, long long *v)
{
	int null = is_null(ps);
	if (null)
		return null < 0 ? -1 : 0;
	if (ps->p >= ps->end || !(*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')))
		return wrong(ps);
	const char *start = ps->p;
	size_t n;
	if (number(ps, &n) < 0)
		return -1;
	long long x;
	if (go_atoi(start, n, &x) < 0) {
		if (!ps->typeerr)
			ps->typeerr = start;
		return 0;
	}
	*v = x;
	return 0;
}

static int string_field(struct parser *ps, struct buf *v)
{
	int null = is_null(ps);
	if (null)
		return null < 0 ? -1 : 0;
	if (ps->p >= ps->end || *ps->p != '"')
		return wrong(ps);
	v->n = 0;
	return string(ps, v);
}

static int bool_field(struct parser *ps, int *v)
{
	int null = is_null(ps);
	if (null)
		return null < 0 ? -1 : 0;
	if (ps->p < ps->end && *ps->p == 't')
		return *v = 1, literal(ps, "true");
	if (ps->p < ps->end && *ps->p == 'f')
		return *v = 0, literal(ps, "false");
	return wrong(ps);
}

static int result_member(struct parser *ps, void *arg)
{
	struct result *r = arg;
	const struct buf *k = &ps->tmp;
	if (key_is(k, "exit_code"))
		return int_field(ps, &r->exit_code);
	if (key_is(k, "duration_ms"))
		return int_field(ps, &r->duration_ms);
	if (key_is(k, "peak_memory"))
		return int_field(ps, &r->peak_memory);
	if (key_is(k, "cpu_time_ms"))
		return int_field(ps, &r->cpu_time_ms);
	if (key_is(k, "backend"))
		return string_field(ps, &r->backend);
	if (key_is(k, "why"))
		return string_field(ps, &r->why);
	if (key_is(k, "stopped"))
		return string_field(ps, &r->stopped);
	if (key_is(k, "request"))
		return string_field(ps, &r->request);
	if (key_is(k, "truncated"))
		return bool_field(ps, &r->truncated);
	if (key_is(k, "warm"))
		return bool_field(ps, &r->warm);
	return value(ps);
}

/* base64 decodes Go's base64.StdEncoding (padded; CR and LF skipped). */
static int base64(const char *s, size_t n, struct buf *out)
{
	static signed char map[256];
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	if (!map[0]) {
		memset(map, -1, sizeof map);
		for (int i = 0; i < 64; i++)
			map[(unsigned char)alpha[i]] = (signed char)i;
	}
	buf_need(out, n / 4 * 3 + 3);
	size_t i = 0;
	for (;;) {
		unsigned int q[4];
		int j = 0;
		while (j < 4) {
			if (i == n) {
				if (j == 0)
					return 0;
				return -1;  /* a quantum without its padding */
			}
			unsigned char c = (unsigned char)s[i++];
			if (c == '\n' || c == '\r')
				continue;
			if (map[c] >= 0) {
				q[j++] = (unsigned int)map[c];
				continue;
			}
			if (c != '=' || j < 2)
				return -1;
			if (j == 2) {
				while (i < n && (s[i] == '\n' || s[i] == '\r'))
					i++;
				if (i == n || s[i] != '=')
					return -1;
				i++;
			}
			while (i < n && (s[i] == '\n' || s[i] == '\r'))
				i++;
			if (i < n)
				return -1;  /* something after the padding */
			break;
		}
		unsigned int v = q[0] << 18 | q[1] << 12 | (j > 2 ? q[2] << 6 : 0) | (j > 3 ? q[3] : 0);
		char b[3] = {(char)(v >> 16), (char)(v >> 8), (char)v};
		buf_add(out, b, (size_t)(j - 1));
		if (j < 4)
			return 0;
	}
}

/* bytes_field parses out or err: base64 in a string, an array of bytes, or null. */
static int bytes_field(struct parser *ps, struct buf *v, int *has)
{
	int null = is_null(ps);
	if (null) {
		if (null > 0)
			*has = 0;
		return null < 0 ? -1 : 0;
	}
	if (ps->p < ps->end && *ps->p == '"') {
		const char *start = ps->p;
		ps->tmp.n = 0;
		if (string(ps, &ps->tmp) < 0)
			return -1;
		v->n = 0;
		if (base64(ps->tmp.p, ps->tmp.n, v) < 0 && !ps->typeerr)
			ps->typeerr = start;
		*has = 1;
		return 0;
	}
	if (ps->p < ps->end && *ps->p == '[') {
		/* Go decodes an array of numbers into a []byte too. */
		ps->p++;
		if (++ps->depth > MAX_DEPTH)
			return syntax(ps);
		v->n = 0;
		*has = 1;
		ws(ps);
		if (ps->p < ps->end && *ps->p == ']') {
			ps->p++;
			ps->depth--;
			return 0;
		}
		for (;;) {
			ws(ps);
			long long x = 0;  /* null leaves a byte 0, as in Go */
			const char *start = ps->p;
			if (int_field(ps, &x) < 0)
				return -1;
			if (x < 0 || x > 255) {
				if (!ps->typeerr)
					ps->typeerr = start;
			} else {
				buf_addc(v, (char)x);
			}
			ws(ps);
			if (ps->p < ps->end && *ps->p == ',') {
				ps->p++;
				continue;
			}
			if (ps->p < ps->end && *ps->p == ']') {
				ps->p++;
				ps->depth--;
				return 0;
			}
			return syntax(ps);
		}
	}
	return wrong(ps);
}

static int event_member(struct parser *ps, void *arg)
{
	struct event *ev = arg;
	const struct buf *k = &ps->tmp;
	if (key_is(k, "out"))
		return bytes_field(ps, &ev->out, &ev->has_out);
	if (key_is(k, "err"))
		return bytes_field(ps, &ev->err, &ev->has_err);
	if (key_is(k, "error"))
		return string_field(ps, &ev->error);
	if (key_is(k, "result")) {
		int null = is_null(ps);
		if (null) {
			if (null > 0)
				ev->has_result = 0;
			return null < 0 ? -1 : 0;
		}
		if (ps->p >= ps->end || *ps->p != '{')
			return wrong(ps);
		ps->p++;
		if (!ev->has_result) {
			struct result *r = &ev->result;
			r->exit_code = r->duration_ms = r->peak_memory = r->cpu_time_ms = 0;
			r->backend.n = r->why.n = r->stopped.n = r->request.n = 0;
			r->truncated = r->warm = 0;
			ev->has_result = 1;
		}
		return members(ps, result_member, &ev->result);
	}
	return value(ps);
}

/* parse_event parses one line of the answer into ev, as json.Unmarshal
 * into an execwire.Event would: 0, or -1 with the error set. */
static int parse_event(struct parser *ps, struct event *ev, const char *line, size_t n)
{
	ev->has_out = ev->has_err = ev->has_result = 0;
	ev->error.n = 0;
	ps->p = line;
	ps->end = line + n;
	ps->bad = ps->typeerr = NULL;
	ps->depth = 0;
	ws(ps);
	int r;
	if (ps->p < ps->end && *ps->p == '{') {
		ps->p++;
		r = members(ps, event_member, ev);
	} else {
		int null = is_null(ps);
		r = null < 0 ? -1 : null > 0 ? 0 : wrong(ps);
	}
	if (r == 0) {
		ws(ps);
		if (ps->p < ps->end)
			syntax(ps);
	}
	if (ps->bad) {
		if (ps->bad >= ps->end)
			return fail(0, "exec answer: unexpected end of JSON input");
		emsg.n = 0;
		ebroken = 0;
		buf_adds(&emsg, "exec answer: invalid character ");
		char c = *ps->bad;
		if (c == '\'')
			buf_adds(&emsg, "'\\''");
		else if (c == '"')
			buf_adds(&emsg, "'\"'");
		else {
			struct buf one = {0}, q = {0};
			encode(&one, (unsigned char)c);
			quote(&q, one.p, one.n);
			q.p[0] = q.p[q.n - 1] = '\'';
			buf_add(&emsg, q.p, q.n);
			free(one.p);
			free(q.p);
		}
		buf_printf(&emsg, " at offset %zu of an event", (size_t)(ps->bad - line));
		return -1;
	}
	if (ps->typeerr)
		return fail(0, "exec answer: json: cannot unmarshal the value at offset %zu into an event's field of its name",
			    (size_t)(ps->typeerr - line));
	return 0;
}

/* ---- the call ---- */

/* json_string appends s as Go's encoding/json writes a string. */
static void json_string(struct buf *b, const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)p;
	buf_addc(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		if (c < 0x80) {
			i++;
			switch (c) {
			case '"': buf_adds(b, "\\\""); continue;
			case '\\': buf_adds(b, "\\\\"); continue;
			case '\b': buf_adds(b, "\\b"); continue;
			case '\f': buf_adds(b, "\\f"); continue;
			case '\n': buf_adds(b, "\\n"); continue;
			case '\r': buf_adds(b, "\\r"); continue;
			case '\t': buf_adds(b, "\\t"); continue;
			}
			if (c < 0x20 || c == '<' || c == '>' || c == '&') {
				char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
				buf_add(b, u, 6);
			} else {
				buf_addc(b, (char)c);
			}
			continue;
		}
		size_t w;
		unsigned int r = decode(s + i, n - i, &w);
		if (r == 0xFFFD && w == 1)
			buf_adds(b, "\\ufffd");
		else if (r == 0x2028 || r == 0x2029)
			buf_printf(b, "\\u%04x", r);
		else
			buf_add(b, s + i, w);
		i += w;
	}
	buf_addc(b, '"');
}

static void base64_encode(struct buf *b, const unsigned char *s, size_t n)
{
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	buf_need(b, n / 3 * 4 + 6);
	for (size_t i = 0; i < n; i += 3) {
		unsigned int v = (unsigned int)s[i] << 16 | (i + 1 < n ? (unsigned int)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
		char q[4] = {alpha[v >> 18], alpha[v >> 12 & 63], i + 1 < n ? alpha[v >> 6 & 63] : '=', i + 2 < n ? alpha[v & 63] : '='};
		buf_add(b, q, 4);
	}
}

/* The command's flags (internal/execcli's Define). */
static const char *f_mount = "", *f_backend = "auto", *f_cwd = "", *f_network = "", *f_timeout = "";
static int f_verbose;
static const char **f_env;
static size_t f_nenv;

static void field_str(struct buf *b, const char *name, const char *v)
{
	if (!*v)
		return;
	buf_printf(b, ",\"%s\":", name);
	json_string(b, v, strlen(v));
}

/* request builds the HTTP request of the exec call. */
static void request(struct buf *req, const struct buf *command, const struct buf *in, int has_stdin)
{
	struct buf body = {0};
	buf_adds(&body, "{\"command\":");
	json_string(&body, command->p ? command->p : "", command->n);
	field_str(&body, "backend", f_backend);
	field_str(&body, "cwd", f_cwd);
	if (f_nenv > 0) {
		buf_adds(&body, ",\"env\":[");
		for (size_t i = 0; i < f_nenv; i++) {
			if (i)
				buf_addc(&body, ',');
			json_string(&body, f_env[i], strlen(f_env[i]));
		}
		buf_addc(&body, ']');
	}
	field_str(&body, "timeout", f_timeout);
	if (has_stdin && in->n > 0) {
		buf_adds(&body, ",\"stdin\":\"");
		base64_encode(&body, (const unsigned char *)in->p, in->n);
		buf_addc(&body, '"');
	}
	field_str(&body, "network", f_network);
	buf_addc(&body, '}');
	buf_printf(req, "POST /v1/exec HTTP/1.0\r\nHost: computerfs\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", body.n);
	buf_add(req, body.p, body.n);
	free(body.p);
}

/* events reads the streamed answer up to the result (execwire.ReadAnswer). */
static int events(struct event *ev)
{
	struct parser ps = {0};
	size_t scanned = 0;
	for (;;) {
		char *start = rd.p + rd_off;
		char *nl = rd.n > rd_off ? memchr(start + scanned, '\n', rd.n - rd_off - scanned) : NULL;
		size_t n;
		if (nl) {
			n = (size_t)(nl - start);
			rd_off += n + 1;
			scanned = 0;
		} else {
			scanned = rd.n - rd_off;
			if (scanned >= MAX_LINE)
				return fail(0, "bufio.Scanner: token too long"), lost();
			if (fill(MAX_LINE))
				continue;
			if (canceled)
				return -1;
			if (scanned == 0) {
				if (rd_err)
					return read_error("");
				return fail(1, "exec: the daemon's answer ended without a result"), lost();
			}
			/* The last line, without its newline. */
			start = rd.p + rd_off;
			n = scanned;
			rd_off += n;
			scanned = 0;
		}
		if (n > 0 && start[n - 1] == '\r')
			n--;
		if (parse_event(&ps, ev, start, n) < 0)
			return -1;
		if (ev->has_out)
			out(1, ev->out.p, ev->out.n);
		else if (ev->has_err)
			out(2, ev->err.p, ev->err.n);
		else if (ev->error.n > 0) {
			emsg.n = 0;
			ebroken = 0;
			buf_add(&emsg, ev->error.p, ev->error.n);
			return -1;
		} else if (ev->has_result)
			return 0;
	}
}

/* call makes the exec call and reads its answer into ev. */
static int call(const struct buf *req, struct event *ev)
{
	if (send_all(req->p, req->n) < 0)
		return -1;
	buf_need(&rd, 64 << 10);
	long long status;
	if (read_head(&status) < 0)
		return -1;
	if (status != 200) {
		while (rd.n - rd_off < MAX_HEAD && fill(MAX_HEAD)) {
		}
		size_t n = rd.n - rd_off;
		if (n > MAX_HEAD)
			n = MAX_HEAD;
		const char *msg = trim_space(rd.p + rd_off, &n);
		emsg.n = 0;
		ebroken = 0;
		buf_add(&emsg, msg, n);
		return -1;
	}
	return events(ev);
}

/* read_stdin reads standard input, up to MAX_STDIN bytes; more is
 * refused, never cut (the command would read part of it as if whole). */
static int read_stdin(struct buf *in)
{
	while (in->n <= MAX_STDIN) {
		size_t want = MAX_STDIN + 1 - in->n;
		if (want > 1 << 20)
			want = 1 << 20;
		buf_need(in, want);
		ssize_t k = read(0, in->p + in->n, want);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			struct pollfd pf = {.fd = 0, .events = POLLIN};
			poll(&pf, 1, -1);
			continue;
		}
		if (k < 0)
			return fail(0, "read /dev/stdin: %s", errstr(errno));
		if (k == 0)
			break;
		in->n += (size_t)k;
	}
	if (in->n > MAX_STDIN)
		return fail(0, "standard input is over %d MiB: write it to a file in the workspace and redirect from it", MAX_STDIN >> 20);
	return 0;
}

/* run is execcli.Run: 0, the command's exit status, or -1 (emsg set;
 * *usage when it is a usage error). */
static int run(char **pos, size_t npos, int *usage)
{
	if (!*f_mount) {
		*usage = 1;
		return fail(0, "missing -w MOUNTPOINT");
	}
	if (npos == 0) {
		*usage = 1;
		return fail(0, "missing COMMAND, as in: computerfs exec -w %s -- 'ls -l'", f_mount);
	}
	struct buf command = {0}, in = {0}, req = {0};
	for (size_t i = 0; i < npos; i++) {
		if (i)
			buf_addc(&command, ' ');
		buf_adds(&command, pos[i]);
	}
	int has_stdin = !isatty(0);
	if (has_stdin && read_stdin(&in) < 0)
		return -1;
	if (!(mp = absolute(f_mount)))
		return -1;
	if (!(store = mounted_store(mp)))
		return -1;
	if (dial() < 0)
		return -1;
	request(&req, &command, &in, has_stdin);
	free(in.p);
	free(command.p);

	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	static struct event ev;
	int r = call(&req, &ev);
	free(req.p);
	if (r < 0 && canceled)
		return fail(0, "context canceled");
	if (r < 0)
		return -1;
	struct result *res = &ev.result;
	struct buf e = {0};
	if (f_verbose) {
		buf_adds(&e, "computerfs exec: backend ");
		buf_add(&e, res->backend.p, res->backend.n);
		buf_adds(&e, " (");
		buf_add(&e, res->why.p, res->why.n);
		buf_printf(&e, "), exit %lld, %lld ms", res->exit_code, res->duration_ms);
		if (res->warm)
			buf_adds(&e, ", warm");
		if (res->peak_memory > 0)
			buf_printf(&e, ", peak memory %lld KiB, CPU %lld ms", res->peak_memory >> 10, res->cpu_time_ms);
		buf_adds(&e, ", request ");
		buf_add(&e, res->request.p, res->request.n);
		buf_addc(&e, '\n');
	}
	if (res->stopped.n > 0) {
		buf_adds(&e, "computerfs exec: stopped: ");
		buf_add(&e, res->stopped.p, res->stopped.n);
		buf_addc(&e, '\n');
	}
	out(2, e.p, e.n);
	free(e.p);
	return (int)(res->exit_code & 0xFF);
}

/* ---- flags (Go's flag package, as execcli.ParseInterleaved uses it) ---- */

static const char help_text[] =
	"computerfs-exec: run a shell command in the workspace's daemon, on the store (or in its sandbox)\n"
	"\n"
	"Example:\n"
	"  computerfs-exec -w /mnt/ws -- 'cd /workspace/repo && go test ./...'\n"
	"\n"
	"Usage:\n"
	"  computerfs-exec -w MOUNTPOINT [flags] -- 'COMMAND'\n"
	"\n"
	"The exit status is the command's. Standard input is passed on when it is not a terminal.\n"
	"computerfs-exec is computerfs exec in a small binary that starts faster.\n"
	"\n"
	"Flags:\n"
	"  -backend string\n"
	"    \tshell (in the daemon, on the store), sandbox, or auto (shell when every command is built in) (default \"auto\")\n"
	"  -cwd string\n"
	"    \tworking directory (default /workspace)\n"
	"  -env value\n"
	"    \tKEY=VALUE for the command's environment (repeatable)\n"
	"  -network string\n"
	"    \tthe sandbox's network: none (default) or host (if the daemon allows it)\n"
	"  -timeout string\n"
	"    \tstop the command after this long (e.g. 30s)\n"
	"  -v\tsay on stderr which backend ran the command, why, and how it ended\n"
	"  -w string\n"
	"    \tthe workspace's mount point\n";

enum { PARSED, HELP, BAD };

/* parse parses args into the flags and the positional arguments, which
 * flags may come before and after; "--" ends the flags. */
static int parse(int argc, char **argv, char **pos, size_t *npos)
{
	f_env = calloc((size_t)argc + 1, sizeof *f_env);
	if (!f_env)
		oom();
	for (int i = 0; i < argc;) {
		char *s = argv[i];
		if (strcmp(s, "--") == 0) {
			for (i++; i < argc; i++)
				pos[(*npos)++] = argv[i];
			break;
		}
		if (strlen(s) < 2 || s[0] != '-') {
			pos[(*npos)++] = s;
			i++;
			continue;
		}
		char *name = s + (s[1] == '-' ? 2 : 1);
		if (!*name || *name == '-' || *name == '=')
			return fail(0, "bad flag syntax: %s", s), BAD;
		i++;
		char *eq = strchr(name + 1, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		const char *val = eq ? eq + 1 : NULL;
#define IS(n) (nlen == strlen(n) && strncmp(name, n, nlen) == 0)
		const char **str = IS("w") ? &f_mount : IS("backend") ? &f_backend : IS("cwd") ? &f_cwd
				 : IS("network") ? &f_network : IS("timeout") ? &f_timeout : NULL;
		if (IS("v")) {
			if (!val) {
				f_verbose = 1;
				continue;
			}
			static const char *yes[] = {"1", "t", "T", "TRUE", "true", "True"}, *no[] = {"0", "f", "F", "FALSE", "false", "False"};
			int ok = 0;
			for (int k = 0; k < 6; k++) {
				if (strcmp(val, yes[k]) == 0)
					f_verbose = 1, ok = 1;
				if (strcmp(val, no[k]) == 0)
					f_verbose = 0, ok = 1;
			}
			if (!ok) {
				emsg.n = 0;
				buf_adds(&emsg, "invalid boolean value ");
				quote(&emsg, val, strlen(val));
				buf_adds(&emsg, " for -v: parse error");
				return BAD;
			}
			continue;
		}
		if (!str && !IS("env")) {
			if (IS("h") || IS("help"))
				return HELP;
			emsg.n = 0;
			buf_adds(&emsg, "flag provided but not defined: -");
			buf_add(&emsg, name, nlen);
			return BAD;
		}
		if (!val) {
			if (i == argc) {
				emsg.n = 0;
				buf_adds(&emsg, "flag needs an argument: -");
				buf_add(&emsg, name, nlen);
				return BAD;
			}
			val = argv[i++];
		}
		if (str)
			*str = val;
		else
			f_env[f_nenv++] = val;
#undef IS
	}
	return PARSED;
}

int main(int argc, char **argv)
{
	char **pos = calloc((size_t)argc + 1, sizeof *pos);
	if (!pos)
		oom();
	size_t npos = 0;
	int usage = 0, code;
	switch (parse(argc - 1, argv + 1, pos, &npos)) {
	case HELP:
		out(1, help_text, sizeof help_text - 1);
		return 0;
	case BAD:
		usage = 1;
		code = -1;
		break;
	default:
		code = run(pos, npos, &usage);
	}
	if (code >= 0)
		return code;
	struct buf m = {0};
	buf_adds(&m, "computerfs exec: ");
	text(&m, emsg.p, emsg.n);
	if (usage)
		buf_adds(&m, "; see 'computerfs exec -h'");
	buf_addc(&m, '\n');
	out(2, m.p, m.n);
	return usage ? 2 : 1;
}
