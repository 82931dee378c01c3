package snowflake

// Failover to other daemons' HTTP fronts (docs/client.md, "Remotes and failover"), the
// C++ RemotePool's rules: the local ring first; while the local daemon is not serving,
// the remotes over HTTP with a per-attempt timeout inside an overall deadline, sticky
// last-good ordering and a per-endpoint breaker (50 ms .. 2 s, doubling, ±50% jitter).
// Whatever the source, a Client never returns an ID at or below one it returned before,
// nor a remote ID older than remoteMaxAge or further than remoteMaxAhead ahead of this
// host's clock (a remote with a skewed clock or of another epoch: its IDs decode, with
// this Client's epoch, far from the clock).
//
// A remote written https://host:port is asked over TLS only (1.2 or later), its
// certificate verified (chain and host name) against the CA file of the options or
// $SNOWFLAKE_REMOTES_CA (else the system's roots), presenting a client certificate when
// one is set: a failed verification fails that attempt, never falls back to plain HTTP.
// The files are looked at again at most once a second while remotes are asked: a changed
// set (cert-manager, certbot) is used for new connections once it loads.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The C++ ClientOptions defaults.
const (
	defaultRemoteAttemptTimeout = 50 * time.Millisecond
	defaultRemoteDeadline       = 200 * time.Millisecond
	remoteMaxAge                = 100 * time.Millisecond
	remoteMaxAhead              = 50 * time.Millisecond
	breakerBase                 = 50 * time.Millisecond
	breakerMax                  = 2 * time.Second
	// A remote's Retry-After is obeyed up to this: a longer one is a remote to skip for a
	// minute, not one to forget.
	maxRetryAfter  = time.Minute
	maxRemoteBatch = 4096
	// A remote answer entirely at or below our last ID (another host's same millisecond):
	// wait for the next millisecond and ask again, this many times at most.
	staleRetries = 2
	// A local ring whose IDs are at most this far below the last ID a remote gave us is
	// waited for (see take): polled this often, one ID at a time, for the gap and 2 ms more.
	catchUpMs   = 10
	catchUpPoll = 100 * time.Microsecond
	// How often the remotes' TLS files are looked at for a change.
	tlsCheckEvery = time.Second
)

type endpoint struct {
	address   string    // as given: "host:port", "http://host:port", "https://host:port"
	urlPrefix string    // "http(s)://host:port/v1/ids?service=S&count="
	failures  int       // consecutive; guarded by remotePool.mu
	openUntil time.Time // breaker: skip until then; guarded by remotePool.mu
	lastError string    // guarded by remotePool.mu
}

// remotePool is safe for concurrent use: the breakers are guarded by mu; requests run
// outside it.
type remotePool struct {
	layout    Layout // the client's daemon's (the default without one): an ID's age
	epochMs   int64
	attempt   time.Duration               // one HTTP attempt's timeout (WithRemoteTimeouts)
	deadline  time.Duration               // all attempts of one take together
	client    atomic.Pointer[http.Client] // replaced when the TLS files change
	tls       remoteTLS                   // guarded by tlsMu after construction
	tlsMu     sync.Mutex
	last      atomic.Uint64 // the largest ID returned (local or remote); only raised, by CAS
	mu        sync.Mutex
	endpoints []*endpoint // fixed after construction
	preferred int         // guarded by mu
	jitter    *rand.Rand  // guarded by mu
}

// splitRemote is the C++ SplitRemote: "https://host:port" -> true and "host:port";
// "http://host:port" and "host:port" -> false and "host:port"; ok false for any other
// scheme or an empty address.
func splitRemote(remote string) (secure bool, hostPort string, ok bool) {
	if strings.HasPrefix(remote, "https://") {
		secure, remote = true, remote[len("https://"):]
	} else if strings.HasPrefix(remote, "http://") {
		remote = remote[len("http://"):]
	} else if strings.Contains(remote, "://") {
		return false, "", false
	}
	remote = strings.TrimRight(remote, "/")
	if remote == "" || strings.ContainsAny(remote, "/?#@ ") {
		return false, "", false
	}
	return secure, remote, true
}

// tlsFiles are the remotes' TLS files, each the option if set, else its environment
// variable ("" for none).
type tlsFiles struct{ ca, cert, key string }

// stamp is the files' status (device, inode, size, modification time; links followed): a
// file replaced or rewritten changes it.
func (f tlsFiles) stamp() string {
	var b strings.Builder
	for _, file := range []string{f.ca, f.cert, f.key} {
		var st syscall.Stat_t
		if file == "" || syscall.Stat(file, &st) != nil {
			b.WriteString("-;")
			continue
		}
		for _, v := range []int64{int64(st.Dev), int64(st.Ino), st.Size, st.Mtim.Sec, st.Mtim.Nsec} {
			b.WriteString(strconv.FormatInt(v, 10))
			b.WriteByte(':')
		}
	}
	return b.String()
}

// remoteTLS is the remotes' TLS setup: the files, their stamp when last loaded, the
// configuration made from them, and when to look at them next.
type remoteTLS struct {
	files       tlsFiles
	systemRoots bool // no CA file and an https:// remote: the system's roots
	stamp       string
	config      *tls.Config
	nextLook    time.Time
	refused     string // why the changed files were not taken; "" once they were
}

func optionOrEnvironment(option, variable string) string {
	if option != "" {
		return option
	}
	return os.Getenv(variable)
}

// checkRemotes is the C++ RemotePool::Check, with the same rules and sentences: every
// remote of a known form; no TLS file beside a plain remote; a certificate and its key
// both or neither; every file readable. It also loads them (the C++ client leaves that to
// each connection): a CA file without a certificate or a pair that does not load is
// refused here, naming the file, rather than failing every attempt later.
func checkRemotes(remotes []string, o *options) (remoteTLS, error) {
	for _, remote := range remotes {
		if _, _, ok := splitRemote(remote); !ok {
			return remoteTLS{}, invalidArgument("remote \"" + remote + "\": expected host:port, " +
				"http://host:port or https://host:port")
		}
	}
	files := tlsFiles{optionOrEnvironment(o.remotesCA, "SNOWFLAKE_REMOTES_CA"),
		optionOrEnvironment(o.remotesCert, "SNOWFLAKE_REMOTES_CERT"),
		optionOrEnvironment(o.remotesKey, "SNOWFLAKE_REMOTES_KEY")}
	// TLS files beside a plain remote would be ignored for it: its answers would come
	// unauthenticated while the caller believes it set up TLS.
	if files.ca != "" || files.cert != "" {
		for _, remote := range remotes {
			if secure, hostPort, _ := splitRemote(remote); !secure {
				return remoteTLS{}, invalidArgument("remote \"" + remote + "\" is plain HTTP, but a " +
					"TLS CA file or client certificate for the remotes is set " +
					"(WithRemotesCA/WithRemotesCert, or $SNOWFLAKE_REMOTES_CA/" +
					"$SNOWFLAKE_REMOTES_CERT): write it as https://" + hostPort +
					", or unset the TLS files")
			}
		}
	}
	if (files.cert == "") != (files.key == "") {
		return remoteTLS{}, invalidArgument("a client certificate for https:// remotes needs its " +
			"key, and a key its certificate (WithRemotesCert, or $SNOWFLAKE_REMOTES_CERT and " +
			"$SNOWFLAKE_REMOTES_KEY: both or neither)")
	}
	t := remoteTLS{files: files, systemRoots: files.ca == "" && hasTLSRemote(remotes)}
	// The stamp before the contents: a change while they are read is seen at the next look.
	t.stamp = files.stamp()
	config, e := loadTLS(files, t.systemRoots)
	if e != nil {
		return remoteTLS{}, e
	}
	t.config = config
	return t, nil
}

// loadTLS makes the TLS configuration of the files; its errors name the file.
func loadTLS(files tlsFiles, systemRoots bool) (*tls.Config, *Error) {
	contents := map[string][]byte{}
	for _, f := range []struct{ what, file string }{{"CA file", files.ca},
		{"client certificate", files.cert}, {"client key", files.key}} {
		if f.file == "" {
			continue
		}
		data, err := os.ReadFile(f.file)
		if err != nil {
			return nil, newError(statusInvalidArgument, "the remotes' TLS "+f.what+" "+f.file+
				" cannot be read: "+osReason(err))
		}
		contents[f.what] = data
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if files.ca != "" {
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(contents["CA file"]) {
			return nil, newError(statusInvalidArgument, "the remotes' TLS CA file "+files.ca+
				" holds no PEM certificate")
		}
	} else if systemRoots {
		// The system's roots, loaded now: Go loads them on the first handshake otherwise,
		// and reading /etc/ssl/certs can take longer than a whole attempt (50 ms).
		roots, err := x509.SystemCertPool()
		if err != nil {
			return nil, newError(statusInvalidArgument, "https:// remotes without a CA file "+
				"are verified against the system's CAs, which cannot be loaded: "+err.Error()+
				"; name a CA file (WithRemotesCA or $SNOWFLAKE_REMOTES_CA)")
		}
		config.RootCAs = roots
	}
	if files.cert != "" {
		pair, err := tls.X509KeyPair(contents["client certificate"], contents["client key"])
		if err != nil {
			return nil, newError(statusInvalidArgument, "the remotes' TLS client certificate "+
				files.cert+" and key "+files.key+" do not load: "+err.Error())
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

func hasTLSRemote(remotes []string) bool {
	for _, remote := range remotes {
		if secure, _, _ := splitRemote(remote); secure {
			return true
		}
	}
	return false
}

// osReason is an OS error's reason alone, as strerror words it ("permission denied"),
// without Go's "open <file>:" prefix (the message names the file itself).
func osReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		var errno syscall.Errno
		if errors.As(pe.Err, &errno) {
			return errno.Error()
		}
		return pe.Err.Error()
	}
	return err.Error()
}

func newHTTPClient(config *tls.Config, attempt time.Duration) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil, // fronts are reached directly, never through a proxy
			DialContext:         (&net.Dialer{Timeout: attempt}).DialContext,
			TLSClientConfig:     config,
			TLSHandshakeTimeout: attempt,
			MaxIdleConnsPerHost: 4,
			// A transport replaced by rotated TLS files is closed only when idle: its
			// connections must still end by themselves.
			IdleConnTimeout:    90 * time.Second,
			DisableCompression: true,
		},
		// A redirect is never followed (as curl by default): an https:// remote must not
		// send the request on to a plain or another host.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
}

// newRemotePool takes remotes and their TLS setup, both checked by checkRemotes, and the
// timeouts of one attempt and of all attempts of a take (0: the defaults).
func newRemotePool(service string, remotes []string, t remoteTLS, layout Layout,
	attempt, deadline time.Duration) *remotePool {
	if attempt <= 0 {
		attempt = defaultRemoteAttemptTimeout
	}
	if deadline <= 0 {
		deadline = defaultRemoteDeadline
	}
	p := &remotePool{layout: layout, epochMs: layout.Epoch.UnixMilli(), attempt: attempt, deadline: deadline, tls: t,
		jitter: rand.New(rand.NewSource(time.Now().UnixNano()))}
	p.tls.nextLook = time.Now().Add(tlsCheckEvery)
	p.client.Store(newHTTPClient(t.config, attempt))
	for _, address := range remotes {
		secure, hostPort, _ := splitRemote(address)
		scheme := "http://"
		if secure {
			scheme = "https://"
		}
		p.endpoints = append(p.endpoints, &endpoint{address: address,
			urlPrefix: scheme + hostPort + "/v1/ids?service=" + service + "&count="})
	}
	return p
}

func (p *remotePool) close() { p.client.Load().CloseIdleConnections() }

// refreshTLS looks at the TLS files at most every tlsCheckEvery and, when one changed and
// the set loads, asks with a configuration of the new set from then on (connections
// already open keep the old one until they close). A set that does not load (a key
// written before its certificate, a file half written) is not taken: the old one stays,
// the set is tried again at the next look, and the result says why.
func (p *remotePool) refreshTLS() (refused string) {
	p.tlsMu.Lock()
	defer p.tlsMu.Unlock()
	t := &p.tls
	now := time.Now()
	if t.files == (tlsFiles{}) || now.Before(t.nextLook) {
		return t.refused
	}
	t.nextLook = now.Add(tlsCheckEvery)
	stamp := t.files.stamp()
	if stamp == t.stamp {
		return t.refused
	}
	config, e := loadTLS(t.files, t.systemRoots)
	if e != nil {
		t.refused = e.Message
		return t.refused
	}
	t.stamp, t.config, t.refused = stamp, config, ""
	p.client.Swap(newHTTPClient(config, p.attempt)).CloseIdleConnections()
	return ""
}

// admit drops IDs at or below the last returned one and raises it; returns how many are
// left at the front of out[:n]. Cases: (1) all at or below: none; (2) a prefix is: drop
// it (IDs wasted, never reissued); (3) raise last to our largest; a failed CAS means
// another goroutine returned a larger ID meanwhile: re-filter against it.
func (p *remotePool) admit(out []uint64, n int) int {
	for {
		last := p.last.Load()
		skip := 0
		for skip < n && out[skip] <= last {
			skip++
		}
		if skip == n {
			return 0
		}
		if p.last.CompareAndSwap(last, out[n-1]) {
			copy(out, out[skip:n])
			return n - skip
		}
	}
}

func (p *remotePool) take(out []uint64, local func([]uint64) (int, error)) (int, error) {
	var catchUpUntil time.Time // zero until the ring is found a little behind
	for attempt := 0; ; attempt++ {
		want := out
		if !catchUpUntil.IsZero() {
			want = out[:1] // while catching up, one ID at a time: the rest would be wasted
		}
		n, err := local(want)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !unavailable(e.Status) || len(p.endpoints) == 0 {
				return 0, err
			}
			return p.takeRemote(out, e)
		}
		taken := n
		if n = p.admit(out, n); n > 0 {
			return n, nil
		}
		// The ring's IDs are at or below one a remote gave us: the remote's millisecond or
		// one just before it right after a failover, or a local clock a little behind the
		// remote's. The ring passes the gap in that many milliseconds: wait for it there,
		// once. Asking a remote instead puts the last ID at the remote's clock again, so the
		// client stays on the remotes for as long as each answer lands ahead of the ring.
		behindMs := int64(-1)
		if taken > 0 {
			shift := p.layout.timeShift()
			behindMs = int64(p.last.Load()>>shift) - int64(out[taken-1]>>shift)
		}
		if behindMs >= 0 && behindMs <= catchUpMs {
			now := time.Now()
			if catchUpUntil.IsZero() {
				catchUpUntil = now.Add(time.Duration(behindMs+2) * time.Millisecond)
			}
			if now.Before(catchUpUntil) {
				time.Sleep(catchUpPoll)
				continue
			}
		}
		// Further behind (or not caught up in time): a local clock well behind the
		// remote's. A few retakes, then keep to the remotes.
		if attempt >= staleRetries {
			return p.takeRemote(out, newError(statusTimedOut, "the local daemon's IDs are at "+
				"or below the last one returned from a remote (its clock is behind)"))
		}
	}
}

func (p *remotePool) takeRemote(out []uint64, localError *Error) (int, error) {
	deadline := time.Now().Add(p.deadline)
	p.mu.Lock()
	order := make([]*endpoint, 0, len(p.endpoints))
	for i := range p.endpoints {
		order = append(order, p.endpoints[(p.preferred+i)%len(p.endpoints)])
	}
	p.mu.Unlock()
	var tried []string
	note := func(e *endpoint, why string) { tried = append(tried, e.address+": "+why) }
	for _, e := range order {
		p.mu.Lock()
		now := time.Now()
		if now.Before(e.openUntil) {
			note(e, "skipped for "+strconv.FormatInt(e.openUntil.Sub(now).Milliseconds(), 10)+
				" ms more after: "+e.lastError)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		for round := 0; round <= staleRetries; round++ {
			left := time.Until(deadline).Truncate(time.Millisecond)
			if left <= 0 {
				note(e, "not tried: the overall deadline of "+
					strconv.FormatInt(p.deadline.Milliseconds(), 10)+" ms passed")
				break
			}
			if left > p.attempt {
				left = p.attempt
			}
			n, retryAfter, why := p.fetch(e, out, left)
			p.mu.Lock()
			if why != "" {
				e.failures++
				e.lastError = why
				shift := e.failures - 1
				if shift > 6 {
					shift = 6
				}
				backoff := breakerBase << shift
				if backoff > breakerMax {
					backoff = breakerMax
				}
				skip := time.Duration(float64(backoff) * (0.5 + p.jitter.Float64()))
				// A remote that says when to come back (429 and 503 carry Retry-After) is
				// skipped until then, at least: asking sooner only adds to its load.
				if retryAfter > maxRetryAfter {
					retryAfter = maxRetryAfter
				}
				if retryAfter > skip {
					skip = retryAfter
				}
				e.openUntil = time.Now().Add(skip)
				p.mu.Unlock()
				note(e, why)
				break
			}
			e.failures = 0
			for i, other := range p.endpoints {
				if other == e {
					p.preferred = i
				}
			}
			p.mu.Unlock()
			if n = p.admit(out, n); n > 0 {
				return n, nil
			}
			// Another host's IDs of a millisecond we already passed: wait for the next one.
			if round == staleRetries {
				note(e, "its IDs stayed at or below the last one returned (its clock is behind)")
			} else {
				time.Sleep(time.Millisecond)
			}
		}
	}
	return 0, newError(localError.Status, "no ID: the local daemon is not serving ("+
		localError.Message+"), and no remote gave one: "+strings.Join(tried, "; "))
}

// fetch is one HTTP attempt; it fills out and returns n, or why it failed and the
// refusal's Retry-After (0 if none).
func (p *remotePool) fetch(e *endpoint, out []uint64, timeout time.Duration) (int, time.Duration, string) {
	refused := p.refreshTLS()
	n, retryAfter, why := p.fetchWith(p.client.Load(), e, out, timeout)
	if why != "" && refused != "" {
		why += " (changed TLS files not used: " + refused + ")"
	}
	return n, retryAfter, why
}

// retryAfterOf is a reply's Retry-After in delay-seconds (RFC 9110; the front sends no
// HTTP-date), or 0 if there is none or it is not a positive number.
func retryAfterOf(resp *http.Response) time.Duration {
	text := resp.Header.Get("Retry-After")
	seconds, err := strconv.ParseInt(text, 10, 64)
	if err != nil || seconds <= 0 || text[0] == '+' {
		return 0
	}
	if seconds > 86400 {
		seconds = 86400
	}
	return time.Duration(seconds) * time.Second
}

func (p *remotePool) fetchWith(httpClient *http.Client, e *endpoint, out []uint64,
	timeout time.Duration) (int, time.Duration, string) {
	want := len(out)
	if want > maxRemoteBatch {
		want = maxRemoteBatch
	}
	if timeout < time.Millisecond {
		timeout = time.Millisecond
	}
	req, err := http.NewRequest(http.MethodGet, e.urlPrefix+strconv.Itoa(want), nil)
	if err != nil {
		return 0, 0, err.Error()
	}
	req.Header.Set("Accept", "text/plain")
	client := *httpClient
	client.Timeout = timeout
	resp, err := client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, 0, "Timeout was reached (" + strconv.FormatInt(timeout.Milliseconds(), 10) + " ms)"
		}
		// The reason without Go's `Get "<url>":` (the note names the remote): a refused
		// verification reads "tls: failed to verify certificate: x509: certificate signed
		// by unknown authority".
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, 0, err.Error()
	}
	defer resp.Body.Close()
	// A reply to 4096 IDs is under 100 KB; anything far larger is not our front.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20+1))
	if err != nil {
		return 0, 0, err.Error()
	}
	if len(body) > 1<<20 {
		return 0, 0, "a reply larger than 1 MiB"
	}
	if resp.StatusCode != http.StatusOK {
		why := "HTTP " + strconv.Itoa(resp.StatusCode)
		if code := errorCodeOf(body); code != "" {
			why += " " + code
		}
		retryAfter := retryAfterOf(resp)
		if retryAfter > 0 {
			why += " (Retry-After " + strconv.FormatInt(int64(retryAfter/time.Second), 10) + " s)"
		}
		return 0, retryAfter, why
	}
	// The protocol's reply (protocol/id_reply.h), then this client's own bounds: none
	// older than max_age nor further ahead than max_ahead.
	n, why := readIDsText(body, out[:want])
	if why != "" {
		return 0, 0, why
	}
	nowMs := time.Now().UnixMilli()
	oldest, newest := nowMs-remoteMaxAge.Milliseconds(), nowMs+remoteMaxAhead.Milliseconds()
	for _, id := range out[:n] {
		idMs := p.epochMs + int64(id>>p.layout.timeShift())
		if idMs < oldest {
			return 0, 0, "an ID " + strconv.FormatInt(nowMs-idMs, 10) + " ms old (more than " +
				"remote_max_age " + strconv.FormatInt(remoteMaxAge.Milliseconds(), 10) +
				" ms; is its clock or its epoch different?)"
		}
		// Never admitted: it would raise the last returned ID that far ahead, and every take
		// would then refuse correct sources (below it) until this host's clock caught up.
		if idMs > newest {
			return 0, 0, "an ID " + strconv.FormatInt(idMs-nowMs, 10) + " ms ahead of this " +
				"host's clock (more than remote_max_ahead " +
				strconv.FormatInt(remoteMaxAhead.Milliseconds(), 10) + " ms): its clock is " +
				"fast, or its epoch or layout is not this client's (" + strconv.FormatInt(p.epochMs, 10) +
				" ms, " + p.layout.String() + ")"
		}
	}
	return n, 0, ""
}

// readIDsText reads a text/plain take reply (protocol/id_reply.h, golden bodies in
// tests/protocol/id_replies.json) into out: one decimal ID per line, each line ended by
// "\n", every ID below 2^63 and above the one before it, at least one and at most
// len(out). It returns how many, or the reason in the words every taker uses.
func readIDsText(body []byte, out []uint64) (int, string) {
	text := string(body)
	n := 0
	for len(text) > 0 {
		nl := strings.IndexByte(text, '\n')
		if nl < 0 || n == len(out) {
			return 0, "a malformed reply (not one ID per line)"
		}
		id, err := strconv.ParseUint(text[:nl], 10, 64)
		// IDs are below 2^63 (the layout's top bit is 0).
		if err != nil || text[0] == '+' || id>>63 != 0 {
			return 0, "a malformed ID"
		}
		if n > 0 && id <= out[n-1] {
			return 0, "IDs not strictly increasing"
		}
		out[n] = id
		n++
		text = text[nl+1:]
	}
	if n == 0 {
		return 0, "an empty reply"
	}
	return n, ""
}

// errorCodeOf is the code of a refusal's body ({"error":{"code":"paused",…}} gives
// "paused"), or "" if the body is not such an object.
func errorCodeOf(body []byte) string {
	var doc struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	return doc.Error.Code
}
