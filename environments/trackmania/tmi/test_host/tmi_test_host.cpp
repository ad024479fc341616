// tmi_test_host: runs rulka's TMInterface plugin (rulka_link.as) outside the game.
//
// It embeds the AngelScript engine, registers a stub of the TMInterface 2 plugin API that the
// plugin uses, drives a toy car on a straight line (+z) and calls the plugin's callbacks like the
// game would. The Python client then talks to the *real plugin code* over TCP on 127.0.0.1.
//
// Every declaration registered here is checked by a test against the public declaration of the
// TMInterface 2 API (tests/environments/trackmania/tmi/data/tmi2_api.predefined, from
// sashi0034/angel-lsp): same names, return and parameter types, enum values. `--dump-api` prints them.
//
// Behaviours modelled on purpose (each has a test):
//   * enum values must be scoped (asEP_REQUIRE_ENUM_SCOPE) unless --strict-enum-scope 0;
//   * accepted sockets keep Nagle's algorithm on until the plugin sets NoDelay = true;
//   * registered variables keep the value of an earlier session (--saved-variables name=value,...);
//   * callbacks in TMInterface 2's order: GetPluginInfo(), Main(), then the launch's /configstring and
//     the command lists Main() queued, and only then frames (Render()) and game states; with
//     --pre-config-renders N, Render() runs N times before /configstring instead (the other order a
//     game could have: a plugin must survive both; see docs/real_game.md, "A plugin nobody here wrote");
//   * a script exception in a callback is logged ("[host] script exception in <callback>: <what>
//     (<file> line <n>)") and ends that call only: the plugin and the game go on, its next callbacks
//     run (--script-exceptions continue, the default); --script-exceptions exit ends the game instead
//     ("TERMINATED script-error", exit status 5), which tests of our own plugin use to fail loudly;
//   * SaveState() records the held inputs and RewindToState() restores them;
//   * PreventSimulationFinish() does nothing in a normal race unless --prevent-finish-works 1: a
//     finish that is not undone ends the race (end dialog, InRace false);
//   * a minimised window (--minimised 1) makes CaptureScreenshot return an empty array until
//     Graphics::ShowGameWindow(); the console is open after start until `toggle_console`, and an
//     open console covers the top quarter of every screenshot (white);
//   * --lose-input-every K ignores every K-th SetInputState call in a race (inputs "sometimes not
//     applied", as Linesight observed);
//   * `map <name>` loads a map on the running instance (--map-load-ms of loading, then countdown);
//     --map-checkpoints "A=8,20;B=12,30" gives each map its own checkpoints;
//   * the input record (InputEvents.ToCommandsText) lists each key change at the race time of the
//     first tick it applies to.
//
// Stand-in game (--physics PYTHON): the toy car is replaced by the built-in simulator's car, track,
// checkpoints and frames, served by `PYTHON -m environments.trackmania.tmi.standin.physics` (a child
// process, one binary request per tick / state / frame over a pipe; protocol in that module), or, with
// --physics-transport embedded (a host built with RULKA_EMBED_PYTHON, see the Makefile), by the same
// module in an interpreter embedded in this process: the same requests and replies, passed as bytes to
// its `embedded_answerer` instead of through the pipe (no second process, no hand-off per request). `map NAME`
// then loads a simulator track (built-in name, procedural seed or reference-line .npy), each tick steps
// the car with the held inputs, SaveState() returns the simulated car's blob, RewindToState() restores
// it, and CaptureScreenshot returns the simulator's first-person frame as BGRA (gray in B, G and R).
// Every behaviour above keeps its option. `rulka tmi standin` / standin/launch.sh start it like TMNF.
// --physics-batch-ms P (the stand-in's default: 50, rulka's action period) asks the child for the
// ticks up to the next race time that is a multiple of P or 10 ms past one in one request (fewer
// round trips); the plugin's callbacks still run once per tick, and the child is put back in step
// before anything reads or changes the car, so every message and frame is the same as with 0.
//
// Usage: tmi_test_host --plugin rulka_link.as --config "set custom_port 8478" [options, see main()]
// Prints "COMPILED", then "LISTENING <port>" on stdout once the plugin listens; "TERMINATED ..." on exit.
// State blobs use the byte offsets of environments/trackmania/tmi/link/state.py (the game's layout).

#ifdef RULKA_EMBED_PYTHON  // Python.h comes first (it may set feature macros)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif
#include <angelscript.h>
#include <angelscript/scriptarray.h>
#include <angelscript/scriptstdstring.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef AS_USE_NAMESPACE  // Debian's libangelscript is built with its symbols in this namespace
using namespace AngelScript;
#endif

namespace {

asIScriptEngine* g_engine = nullptr;
const auto g_t0 = std::chrono::steady_clock::now();

uint64_t NowMs() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - g_t0).count());
}

void HostLog(const std::string& msg) { std::fprintf(stderr, "[host] %s\n", msg.c_str()); }
void ScriptLog(const std::string& msg, int /*severity*/) { std::fprintf(stderr, "[plugin] %s\n", msg.c_str()); }

CScriptArray* NewByteArray(size_t n) {
    asITypeInfo* ti = g_engine->GetTypeInfoByDecl("array<uint8>");
    return CScriptArray::Create(ti, static_cast<asUINT>(n));
}

std::vector<std::string> SplitOn(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, sep)) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

// ------------------------------------------------------------------ Net::Socket
class Socket {
public:
    int fd = -1;
    bool broken = false;
    std::string remote_ip;
    int refs = 1;

    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
    ~Socket() {
        if (fd >= 0) close(fd);
    }

    bool Listen(const std::string& host, uint16_t port) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return false;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return false;
        if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 4) != 0) {
            close(fd);
            fd = -1;
            return false;
        }
        std::printf("LISTENING %u\n", static_cast<unsigned>(port));
        std::fflush(stdout);
        return true;
    }

    // Nagle's algorithm stays on (the OS default) until the plugin sets NoDelay.
    Socket* Accept(unsigned timeout_ms) {
        if (fd < 0) return nullptr;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(std::min<unsigned>(timeout_ms, 1000))) <= 0) return nullptr;
        sockaddr_in addr{};
        socklen_t len = sizeof(addr);
        int cfd = accept(fd, reinterpret_cast<sockaddr*>(&addr), &len);
        if (cfd < 0) return nullptr;
        auto* s = new Socket();
        s->fd = cfd;
        char buf[INET_ADDRSTRLEN] = {0};
        inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
        s->remote_ip = buf;
        return s;
    }

    void SetNoDelay(bool value) {
        int v = value ? 1 : 0;
        if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v));
        HostLog(std::string("socket NoDelay = ") + (value ? "true" : "false"));
    }

    // Bytes ready to read; waits up to 1 ms when none (the plugin polls this in a loop).
    unsigned Available() {
        if (fd < 0 || broken) return 0;
        int n = 0;
        ioctl(fd, FIONREAD, &n);
        if (n > 0) return static_cast<unsigned>(n);
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 1) > 0) {
            ioctl(fd, FIONREAD, &n);
            if (n == 0) broken = true;  // readable with nothing to read: the peer closed
        }
        return n > 0 ? static_cast<unsigned>(n) : 0;
    }

    // Blocking exact read (5 s at most); on failure the socket is marked broken and zeros returned.
    bool ReadExact(void* out, size_t n) {
        auto* p = static_cast<char*>(out);
        std::memset(out, 0, n);
        size_t got = 0;
        while (got < n && !broken) {
            pollfd pf{fd, POLLIN, 0};
            if (poll(&pf, 1, 5000) <= 0) {
                broken = true;
                break;
            }
            ssize_t r = recv(fd, p + got, n - got, 0);
            if (r <= 0) {
                broken = true;
                break;
            }
            got += static_cast<size_t>(r);
        }
        return got == n;
    }

    // One send() per Write call, as a socket API without buffering does.
    void WriteRaw(const void* data, size_t n) {
        const auto* p = static_cast<const char*>(data);
        size_t sent = 0;
        while (sent < n && !broken) {
            ssize_t r = send(fd, p + sent, n - sent, MSG_NOSIGNAL);
            if (r <= 0) {
                broken = true;
                break;
            }
            sent += static_cast<size_t>(r);
        }
    }

    int ReadInt32() { int32_t v; ReadExact(&v, 4); return v; }
    unsigned ReadUint32() { uint32_t v; ReadExact(&v, 4); return v; }
    float ReadFloat() { float v; ReadExact(&v, 4); return v; }
    uint8_t ReadUint8() { uint8_t v; ReadExact(&v, 1); return v; }
    CScriptArray* ReadBytes(unsigned n) {
        CScriptArray* a = NewByteArray(n);
        if (n > 0) ReadExact(a->At(0), n);
        return a;
    }
    std::string ReadString(unsigned n) {
        std::string s(n, '\0');
        if (n > 0) ReadExact(&s[0], n);
        return s;
    }
    bool WriteInt(int v) { WriteRaw(&v, 4); return !broken; }
    bool WriteUint(unsigned v) { WriteRaw(&v, 4); return !broken; }
    bool WriteBytes(const CScriptArray& a) {
        if (a.GetSize() > 0) WriteRaw(a.At(0), a.GetSize());
        return !broken;
    }
    bool WriteString(const std::string& s) {
        if (!s.empty()) WriteRaw(s.data(), s.size());
        return !broken;
    }
    std::string RemoteIP() const { return remote_ip; }
};

Socket* SocketFactory() { return new Socket(); }

// ------------------------------------------------------------------ simulation state blob
// Offsets: see environments/trackmania/tmi/link/state.py.
constexpr size_t OFF_TIMERS = 12, OFF_ROTATION = 688, OFF_POSITION = 724, OFF_LINEAR_SPEED = 736,
                 OFF_ANGULAR_SPEED = 760, OFF_GEARBOX_STATE = 2388, OFF_ACTUAL_RPM = 3112, OFF_GEAR = 3128,
                 OFF_IS_FREEWHEELING = 3196, OFF_WHEELS = 3816, WHEEL_SIZE = 764, WHEEL_OFFSET_FROM_VEHICLE = 168,
                 OFF_RACE_TIME = 7892, OFF_CUR_CP_COUNT = 8024, OFF_RACE_FINISHED = 8032,
                 OFF_INPUT_EVENTS = 8276, OFF_CP_DATA = 8344;

template <typename T>
void Put(std::vector<uint8_t>& b, size_t off, T v) { std::memcpy(&b[off], &v, sizeof(T)); }
template <typename T>
T Get(const std::vector<uint8_t>& b, size_t off) {
    T v{};
    if (off + sizeof(T) <= b.size()) std::memcpy(&v, &b[off], sizeof(T));
    return v;
}

class SimulationState {
public:
    std::vector<uint8_t> data;
    int refs = 1;
    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
    CScriptArray* ToArray() const {
        CScriptArray* a = NewByteArray(data.size());
        if (!data.empty()) std::memcpy(a->At(0), data.data(), data.size());
        return a;
    }
};

SimulationState* StateFactory() { return new SimulationState(); }
SimulationState* StateFactoryFromArray(const CScriptArray& a) {
    auto* s = new SimulationState();
    s->data.resize(a.GetSize());
    if (a.GetSize() > 0) std::memcpy(s->data.data(), a.At(0), a.GetSize());
    return s;
}


// ------------------------------------------------------------------ the simulator's car (stand-in mode)
// A child Python process; see environments/trackmania/tmi/standin/physics.py for the protocol.
struct TickReply {
    int race_time = 0;
    int checkpoints = 0;  // passed, finish included
    bool finished = false;
};

class PhysicsPipe {
public:
    bool enabled = false;
    bool embedded = false;  // --physics-transport embedded: requests go to an in-process interpreter
    pid_t pid = -1;
    int to_child = -1, from_child = -1;
    double seconds = 0;  // wall time spent waiting for the child (reported at exit)
    uint64_t requests = 0;
    uint64_t undone = 0;  // tick batches taken back (Sync)
    int batch_ms = 0;  // --physics-batch-ms: 0 = one request per tick
    std::deque<TickReply> ahead;  // ticks the child ran that the host has not used yet
    uint8_t batch_keys = 0;
    int batch_used = 0;

    void Start(const std::string& python, const std::string& trace, int camera) {
        int down[2], up[2];
        if (pipe(down) != 0 || pipe(up) != 0) Fail("cannot create the physics pipes");
        pid = fork();
        if (pid < 0) Fail("cannot fork the physics process");
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the game
            dup2(down[0], 0);
            dup2(up[1], 1);
            close(down[0]); close(down[1]); close(up[0]); close(up[1]);
            std::string cam = std::to_string(camera);
            std::vector<const char*> argv = {python.c_str(), "-m", "environments.trackmania.tmi.standin.physics",
                                             "--camera", cam.c_str()};
            if (!trace.empty()) { argv.push_back("--trace"); argv.push_back(trace.c_str()); }
            argv.push_back(nullptr);
            execvp(python.c_str(), const_cast<char* const*>(argv.data()));
            std::fprintf(stderr, "[host] cannot run %s\n", python.c_str());
            _exit(127);
        }
        close(down[0]);
        close(up[1]);
        to_child = down[1];
        from_child = up[0];
        enabled = true;
    }

    [[noreturn]] static void Fail(const std::string& why) {
        HostLog("physics: " + why);
        std::printf("TERMINATED physics-error\n");
        std::fflush(stdout);
        std::exit(6);
    }

#ifdef RULKA_EMBED_PYTHON
    PyObject* answerer = nullptr;  // physics.embedded_answerer(camera, trace): bytes -> bytes
#endif
    std::string request;  // embedded: the request being written (every request is written whole, then read)
    std::string reply;  // embedded: the answer not read yet, from reply_at on
    size_t reply_at = 0;

    // The interpreter that `python` (the stand-in's Python, a venv's or not) would be, in this process.
    void StartEmbedded(const std::string& python, const std::string& trace, int camera) {
#ifdef RULKA_EMBED_PYTHON
        PyConfig config;
        PyConfig_InitPythonConfig(&config);
        config.install_signal_handlers = 0;  // the host's signals stay the host's (SIGSTOP, SIGKILL tests)
        config.parse_argv = 0;
        PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, python.c_str());
        if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
        PyConfig_Clear(&config);
        if (PyStatus_Exception(status)) Fail(std::string("cannot start the embedded Python: ") +
                                             (status.err_msg ? status.err_msg : "unknown error"));
        PyObject* module = PyImport_ImportModule("environments.trackmania.tmi.standin.physics");
        PyObject* make = module ? PyObject_GetAttrString(module, "embedded_answerer") : nullptr;
        answerer = make ? PyObject_CallFunction(make, "is", camera, trace.empty() ? nullptr : trace.c_str()) : nullptr;
        Py_XDECREF(make);
        Py_XDECREF(module);
        if (answerer == nullptr) {
            PyErr_Print();
            Fail("cannot load environments.trackmania.tmi.standin.physics in the embedded Python "
                 "(is the repository on PYTHONPATH and numpy installed for " + python + "?)");
        }
        embedded = true;
        enabled = true;
#else
        Fail("this host was built without an embedded Python: use --physics-transport pipe, or rebuild "
             "with the Makefile's PYTHON_EMBED=1 (needs the Python's headers and shared libpython)");
#endif
    }

    // Embedded: the whole request written since the last answer, answered in one call.
    void AnswerEmbedded() {
#ifdef RULKA_EMBED_PYTHON
        const auto t0 = std::chrono::steady_clock::now();
        PyObject* arg = PyBytes_FromStringAndSize(request.data(), static_cast<Py_ssize_t>(request.size()));
        PyObject* out = arg ? PyObject_CallOneArg(answerer, arg) : nullptr;
        Py_XDECREF(arg);
        if (out == nullptr || !PyBytes_Check(out)) {
            PyErr_Print();
            Py_XDECREF(out);
            Fail("the embedded physics failed (traceback above)");
        }
        reply.erase(0, reply_at);
        reply_at = 0;
        reply.append(PyBytes_AS_STRING(out), static_cast<size_t>(PyBytes_GET_SIZE(out)));
        Py_DECREF(out);
        request.clear();
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#endif
    }

    void Send(const void* data, size_t n) {
        const auto* p = static_cast<const char*>(data);
        if (embedded) {
            request.append(p, n);
            return;
        }
        while (n > 0) {
            ssize_t r = write(to_child, p, n);
            if (r <= 0) Fail("the physics process is gone (write)");
            p += r;
            n -= static_cast<size_t>(r);
        }
    }
    void Recv(void* data, size_t n) {
        if (embedded) {
            if (reply.size() - reply_at < n && !request.empty()) AnswerEmbedded();
            if (reply.size() - reply_at < n) Fail("the embedded physics answered too little");
            std::memcpy(data, reply.data() + reply_at, n);
            reply_at += n;
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        auto* p = static_cast<char*>(data);
        while (n > 0) {
            ssize_t r = read(from_child, p, n);
            if (r <= 0) Fail("the physics process is gone (read)");
            p += r;
            n -= static_cast<size_t>(r);
        }
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    template <typename T>
    T RecvValue() { T v{}; Recv(&v, sizeof(T)); return v; }

    TickReply RecvTick() {  // one read: int32 race time, int32 checkpoints, uint8 finished
        uint8_t raw[9];
        Recv(raw, sizeof(raw));
        TickReply t;
        std::memcpy(&t.race_time, raw, 4);
        std::memcpy(&t.checkpoints, raw + 4, 4);
        t.finished = raw[8] != 0;
        return t;
    }
    // One tick at race time `race_time` (before it). With batch_ms > 0 the child runs the ticks up to
    // the next race time that is a multiple of batch_ms, or 10 ms past one (where rulka reads the
    // state, then the frame, then changes the inputs), in one request, and the next ticks are served
    // from its replies while the inputs stay the same. Anything that reads or changes the car first
    // puts the child back where the host is (Sync), so what the plugin sees is the same either way.
    TickReply Tick(uint8_t keys, int race_time) {
        cache_valid = false;
        if (!ahead.empty() && keys == batch_keys) {
            const TickReply t = ahead.front();
            ahead.pop_front();
            ++batch_used;
            return t;
        }
        Sync();
        if (batch_ms <= 0) {
            const uint8_t msg[2] = {'T', keys};
            Send(msg, 2);
            ++requests;
            return RecvTick();
        }
        int n = 1;
        while (n < 255) {
            const int after = (race_time + 10 * n) % batch_ms;
            if (after == 0 || after == 10 % batch_ms) break;
            ++n;
        }
        const uint8_t msg[3] = {'B', keys, static_cast<uint8_t>(n)};
        Send(msg, 3);
        ++requests;
        const int count = RecvValue<uint8_t>();
        if (count < 1 || count > n) Fail("bad tick batch from the physics process");
        std::vector<uint8_t> raw(static_cast<size_t>(count) * 9);
        Recv(raw.data(), raw.size());
        for (int i = 0; i < count; ++i) {
            TickReply t;
            std::memcpy(&t.race_time, &raw[9 * i], 4);
            std::memcpy(&t.checkpoints, &raw[9 * i + 4], 4);
            t.finished = raw[9 * i + 8] != 0;
            ahead.push_back(t);
        }
        batch_keys = keys;
        batch_used = 1;
        const TickReply t = ahead.front();
        ahead.pop_front();
        return t;
    }
    // The child ran ticks the host has not used (the inputs changed mid-batch): take them back.
    void Sync() {
        if (ahead.empty()) return;
        ahead.clear();
        const uint8_t msg[2] = {'U', static_cast<uint8_t>(batch_used)};
        Send(msg, 2);
        ++requests;
        ++undone;
        RecvTick();
    }
    TickReply RaceStart() { Sync(); cache_valid = false; Send("G", 1); ++requests; return RecvTick(); }
    // Loads a track; returns its checkpoint count (finish included), or -1 with `error` set.
    int LoadMap(const std::string& name, std::string& error) {
        const uint16_t n = static_cast<uint16_t>(std::min<size_t>(name.size(), 60000));
        Sync();
        cache_valid = false;
        Send("M", 1);
        Send(&n, 2);
        Send(name.data(), n);
        ++requests;
        const int count = RecvValue<int32_t>();
        const uint16_t len = RecvValue<uint16_t>();
        error.assign(len, '\0');
        if (len > 0) Recv(&error[0], len);
        return count;
    }
    // The car's blob until it changes (a tick, a rewind, a race start, a map): a state read and a
    // rewind to the current state at the same tick (what rulka does every action) cost one request.
    std::vector<uint8_t> cached;
    bool cache_valid = false;
    void Invalidate() { cache_valid = false; }

    std::vector<uint8_t> Save() {
        if (cache_valid) return cached;
        cached = SaveUncached();
        cache_valid = true;
        return cached;
    }
    std::vector<uint8_t> SaveUncached() {
        Sync();
        Send("S", 1);
        ++requests;
        const int n = RecvValue<int32_t>();
        if (n < 0 || n > (1 << 20)) Fail("bad state size from the physics process");
        std::vector<uint8_t> b(static_cast<size_t>(n));
        if (n > 0) Recv(b.data(), b.size());
        return b;
    }
    // Rewinding to the car's current blob changes nothing: answered without a request.
    TickReply Restore(const std::vector<uint8_t>& b, const TickReply& current) {
        if (cache_valid && b.size() >= OFF_CP_DATA && SameCar(b)) return current;
        Sync();
        cache_valid = false;
        const int32_t n = static_cast<int32_t>(b.size());
        Send("R", 1);
        Send(&n, 4);
        if (n > 0) Send(b.data(), b.size());
        ++requests;
        return RecvTick();
    }
    bool SameCar(const std::vector<uint8_t>& b) const {
        if (b.size() != cached.size()) return false;
        // the host patches these from its own state (EncodePhysics); everything else is the car
        const std::pair<size_t, size_t> game_fields[] = {{OFF_TIMERS + 4, 4}, {OFF_RACE_TIME, 4},
                                                        {OFF_RACE_FINISHED, 4}, {OFF_INPUT_EVENTS, 4}};
        size_t start = 0;
        for (const auto& f : game_fields) {
            if (std::memcmp(b.data() + start, cached.data() + start, f.first - start) != 0) return false;
            start = f.first + f.second;
        }
        return std::memcmp(b.data() + start, cached.data() + start, b.size() - start) == 0;
    }

    std::vector<uint8_t> Frame(int w, int h) {
        const int32_t size[2] = {w, h};
        Sync();
        Send("F", 1);
        Send(size, 8);
        ++requests;
        std::vector<uint8_t> gray(static_cast<size_t>(w) * static_cast<size_t>(h));
        if (!gray.empty()) Recv(gray.data(), gray.size());
        return gray;
    }
    bool Camera(int camera) {
        const int32_t c = camera;
        Sync();
        Send("C", 1);
        Send(&c, 4);
        ++requests;
        return RecvValue<uint8_t>() != 0;
    }
    void Stop() {
        if (!enabled) return;
        if (embedded) {
#ifdef RULKA_EMBED_PYTHON
            Py_XDECREF(answerer);
            answerer = nullptr;
            Py_FinalizeEx();
#endif
            enabled = false;
            return;
        }
        close(to_child);  // the child exits at the end of its input
        close(from_child);
        int status = 0;
        waitpid(pid, &status, 0);
        enabled = false;
    }
} g_physics;

// ------------------------------------------------------------------ the toy game
// TMInterface's enum values (as.predefined): TM::GameState and InputType.
enum GameState { GS_STARTUP = 16, GS_MENUS = 32, GS_RACE = 512, GS_RACE_END_DIALOG = 1024 };
enum InputType { IT_DOWN = 0, IT_UP = 1, IT_LEFT = 2, IT_RIGHT = 3 };
const char* const KEY_NAMES[4] = {"down", "up", "left", "right"};

struct PlayerInfo {
    bool race_finished = false;
    int race_time = 0;
};

struct InputEvent {
    int time;
    int type;
    bool pressed;
};

struct Game {
    GameState state = GS_STARTUP;
    bool in_race = false;
    int race_time = 0;  // ms
    int tick_time = 0;  // ms, keeps running after the finish
    double x = 0, z = 0, v = 0;  // metres, m/s along +z
    bool keys[4] = {false, false, false, false};  // indexed by InputType
    float speed = 1.0f;
    bool finished = false;
    bool prevent_finish = false;
    bool prevent_finish_works = false;
    std::vector<double> checkpoints = {20.0, 40.0};  // distances; the last is the finish
    std::map<std::string, std::vector<double>> map_checkpoints;
    std::vector<int> cp_times;  // time per passed checkpoint
    size_t next_cp = 0;  // index of the next checkpoint to trigger
    int countdown_ms = 300;
    std::string map;
    int map_load_ms = 0;
    uint64_t loading_until = 0;
    bool loading = false;
    PlayerInfo player;
    std::vector<InputEvent> events;
    int lose_input_every = 0;
    int input_calls = 0;
    bool minimised = false;
    bool console_open = true;
    float last_running_speed = 1.0f;  // last speed above 1 that was logged
    int physics_checkpoints = 0;  // stand-in: checkpoints the simulated car has passed (finish included)

    void ResetCar() {
        race_time = -countdown_ms;
        tick_time = race_time;
        x = z = v = 0;
        finished = false;
        player.race_finished = false;
        cp_times.clear();
        next_cp = 0;
        events.clear();
        physics_checkpoints = 0;
        if (g_physics.enabled) g_physics.RaceStart();
    }

    // The simulated car's blob with the game's own fields (race time, finish flag, held inputs) set.
    std::vector<uint8_t> EncodePhysics() const {
        std::vector<uint8_t> b = g_physics.Save();
        if (b.size() < OFF_CP_DATA) PhysicsPipe::Fail("state blob too short");
        Put<int32_t>(b, OFF_TIMERS + 4, race_time);
        Put<int32_t>(b, OFF_RACE_TIME, race_time);
        Put<int32_t>(b, OFF_RACE_FINISHED, player.race_finished ? 1 : 0);
        for (int k = 0; k < 4; ++k) b[OFF_INPUT_EVENTS + k] = keys[k] ? 1 : 0;  // held inputs
        return b;
    }

    std::vector<uint8_t> Encode() const {
        if (g_physics.enabled) return EncodePhysics();
        const int n = static_cast<int>(checkpoints.size());
        std::vector<uint8_t> b(OFF_CP_DATA + 12 + 4 * n + 8 * n, 0);
        Put<uint32_t>(b, 0, 1);
        Put<uint32_t>(b, 4, 1);
        Put<uint32_t>(b, 8, 0xFF);
        Put<int32_t>(b, OFF_TIMERS + 4, race_time);
        const float rot[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        std::memcpy(&b[OFF_ROTATION], rot, sizeof(rot));
        const float pos[3] = {static_cast<float>(x), 0.0f, static_cast<float>(z)};
        std::memcpy(&b[OFF_POSITION], pos, sizeof(pos));
        const float vel[3] = {0.0f, 0.0f, static_cast<float>(v)};
        std::memcpy(&b[OFF_LINEAR_SPEED], vel, sizeof(vel));
        const float ang[3] = {0, 0, 0};
        std::memcpy(&b[OFF_ANGULAR_SPEED], ang, sizeof(ang));
        const int gear = v < 0.5 ? 1 : std::min(5, 1 + static_cast<int>(v / 12.0));
        Put<int32_t>(b, OFF_GEARBOX_STATE, 0);
        Put<float>(b, OFF_ACTUAL_RPM, static_cast<float>(1000.0 + 250.0 * std::fmod(v, 12.0)));
        Put<int32_t>(b, OFF_GEAR, gear);
        Put<int32_t>(b, OFF_IS_FREEWHEELING, keys[IT_UP] ? 0 : 1);
        // The API's SimulationWheels order: front-left, front-right, back-right, back-left. The car's
        // x axis points left. Each wheel's damper value is distinct (0.01 * (index + 1)) and the
        // back-left wheel rides on grass, so a test can tell the wheels apart after decoding.
        const float offsets[4][3] = {{0.8f, 0, 1.4f}, {-0.8f, 0, 1.4f}, {-0.8f, 0, -1.2f}, {0.8f, 0, -1.2f}};
        for (int i = 0; i < 4; ++i) {
            const size_t w = OFF_WHEELS + WHEEL_SIZE * i;
            Put<int32_t>(b, w + 4, i < 2 ? 1 : 0);  // steerable: the front wheels
            std::memcpy(&b[w + WHEEL_OFFSET_FROM_VEHICLE], offsets[i], sizeof(offsets[i]));
            Put<float>(b, w + 180, 0.01f * static_cast<float>(i + 1));
            Put<int32_t>(b, w + 292, 1);
            Put<int32_t>(b, w + 296, i == 3 ? 2 : 16);  // Grass under back-left, else Asphalt
            Put<int32_t>(b, w + 300, 0);
        }
        Put<int32_t>(b, OFF_RACE_TIME, race_time);
        Put<int32_t>(b, OFF_CUR_CP_COUNT, static_cast<int32_t>(cp_times.size()));
        Put<int32_t>(b, OFF_RACE_FINISHED, player.race_finished ? 1 : 0);
        for (int k = 0; k < 4; ++k) b[OFF_INPUT_EVENTS + k] = keys[k] ? 1 : 0;  // held inputs
        size_t off = OFF_CP_DATA;
        Put<int32_t>(b, off, 0);
        Put<int32_t>(b, off + 4, n);
        off += 8;
        for (int i = 0; i < n; ++i, off += 4) Put<int32_t>(b, off, i < static_cast<int>(cp_times.size()) ? 1 : 0);
        Put<int32_t>(b, off, n);
        off += 4;
        for (int i = 0; i < n; ++i, off += 8) {
            Put<int32_t>(b, off, i < static_cast<int>(cp_times.size()) ? cp_times[i] : -1);
            Put<int32_t>(b, off + 4, 0);
        }
        return b;
    }

    void Restore(const std::vector<uint8_t>& b) {
        race_time = Get<int32_t>(b, OFF_RACE_TIME);
        tick_time = race_time;
        x = Get<float>(b, OFF_POSITION);
        z = Get<float>(b, OFF_POSITION + 8);
        v = Get<float>(b, OFF_LINEAR_SPEED + 8);
        finished = false;
        player.race_finished = false;
        for (int k = 0; k < 4; ++k) {  // a rewind restores the inputs held when the state was saved
            keys[k] = b.size() > OFF_INPUT_EVENTS + 4 && b[OFF_INPUT_EVENTS + k] != 0;
        }
        events.erase(std::remove_if(events.begin(), events.end(), [this](const InputEvent& e) { return e.time > race_time; }),
                     events.end());
        cp_times.clear();
        const int n_states = Get<int32_t>(b, OFF_CP_DATA + 4);
        if (n_states >= 0 && n_states < 10000) {
            const size_t off = OFF_CP_DATA + 8 + 4 * static_cast<size_t>(n_states);
            const int n_times = Get<int32_t>(b, off);
            for (int i = 0; i >= 0 && i < n_times && i < 10000; ++i) {
                const int t = Get<int32_t>(b, off + 4 + 8 * static_cast<size_t>(i));
                if (t < 0) break;
                cp_times.push_back(t);
            }
        }
        next_cp = cp_times.size();
        if (g_physics.enabled) {
            TickReply current;
            current.checkpoints = physics_checkpoints;
            physics_checkpoints = g_physics.Restore(b, current).checkpoints;
        }
    }

    // One 10 ms physics tick with the held inputs.
    void Physics() {
        if (g_physics.enabled) {
            if (race_time >= 0) {
                const uint8_t held = (keys[IT_UP] ? 1 : 0) | (keys[IT_DOWN] ? 2 : 0) | (keys[IT_LEFT] ? 4 : 0) |
                                     (keys[IT_RIGHT] ? 8 : 0);
                physics_checkpoints = g_physics.Tick(held, race_time).checkpoints;
            }
        } else if (race_time >= 0) {
            const double dt = 0.01;
            double a = -0.5 * v * 0.02;  // drag
            if (keys[IT_UP]) a += 12.0;
            if (keys[IT_DOWN]) a -= v > 0 ? 20.0 : 0.0;
            v = std::max(0.0, v + a * dt);
            z += v * dt;
            if (keys[IT_LEFT]) x += 0.05 * v * dt;
            if (keys[IT_RIGHT]) x -= 0.05 * v * dt;
        }
        if (!finished) race_time += 10;
        tick_time += 10;
        player.race_time = race_time;
    }
} g_game;

// ------------------------------------------------------------------ TM::InputEventBuffer
class InputEventBuffer {
public:
    // TMInterface script lines, one per key change: "<seconds.centis> press|rel <key>".
    std::string ToCommandsText(int /*flags*/) const {
        std::vector<InputEvent> sorted = g_game.events;
        std::stable_sort(sorted.begin(), sorted.end(), [](const InputEvent& a, const InputEvent& b) { return a.time < b.time; });
        std::string out;
        for (const auto& e : sorted) {
            if (e.time < 0) continue;
            char line[64];
            std::snprintf(line, sizeof(line), "%d.%02d %s %s\n", e.time / 1000, (e.time % 1000) / 10,
                          e.pressed ? "press" : "rel", KEY_NAMES[e.type]);
            out += line;
        }
        return out;
    }
    unsigned Length() const { return static_cast<unsigned>(g_game.events.size()); }
    void Clear() { g_game.events.clear(); }
} g_input_events;

// ------------------------------------------------------------------ SimulationManager
class SimulationManager {
public:
    bool InRace() const { return g_game.in_race; }
    int RaceTime() const { return g_game.race_time; }
    int TickTime() const { return g_game.tick_time; }
    PlayerInfo* GetPlayerInfo() { return &g_game.player; }
    InputEventBuffer* GetInputEvents() { return &g_input_events; }
    void SetSpeed(float s) {
        const float before = g_game.speed;
        g_game.speed = s < 0 ? 0 : s;
        if (s > 1.0f && s != before && s != g_game.last_running_speed) {
            g_game.last_running_speed = s;
            char buf[64];
            std::snprintf(buf, sizeof(buf), "speed set to %g", static_cast<double>(s));
            HostLog(buf);
        }
    }
    void GiveUp() { g_game.ResetCar(); }
    void PreventSimulationFinish() { g_game.prevent_finish = true; }
    SimulationState* SaveState() {
        auto* s = new SimulationState();
        s->data = g_game.Encode();
        return s;
    }
    void RewindToState(const SimulationState& s, bool /*resetCamera*/) { g_game.Restore(s.data); }
    void ResetCamera() {}
    void SetInputState(int type, int value) {
        if (type < 0 || type >= 4 || !g_game.in_race) return;
        g_game.input_calls++;
        if (g_game.lose_input_every > 0 && g_game.input_calls % g_game.lose_input_every == 0) {
            HostLog("input lost");
            return;
        }
        const bool pressed = value != 0;
        if (g_game.keys[type] != pressed) g_game.events.push_back({g_game.race_time, type, pressed});
        g_game.keys[type] = pressed;
    }
} g_sim;

SimulationManager* GetSimulationManager() { return &g_sim; }

// ------------------------------------------------------------------ console: variables, commands
std::map<std::string, std::string> g_variables;  // registered by plugins
std::map<std::string, std::string> g_saved_variables;  // values from an earlier session
std::map<std::string, asIScriptFunction*> g_custom_commands;
std::deque<std::string> g_command_queue;
bool g_interface_visible = true;

bool RegisterVariableValue(const std::string& name, const std::string& v) {
    if (g_variables.count(name)) return false;
    auto saved = g_saved_variables.find(name);
    g_variables[name] = saved != g_saved_variables.end() ? saved->second : v;
    return true;
}
bool RegisterVariableDouble(const std::string& name, double v) { return RegisterVariableValue(name, std::to_string(v)); }
bool RegisterVariableBool(const std::string& name, bool v) { return RegisterVariableValue(name, v ? "true" : "false"); }
bool RegisterVariableString(const std::string& name, const std::string& v) { return RegisterVariableValue(name, v); }
double GetVariableDouble(const std::string& name) {
    auto it = g_variables.find(name);
    return it == g_variables.end() ? 0.0 : std::atof(it->second.c_str());
}
void RegisterCustomCommand(const std::string& name, const std::string& /*description*/, asIScriptFunction* cb) {
    if (g_custom_commands.count(name)) g_custom_commands[name]->Release();
    g_custom_commands[name] = cb;  // the handle passed in is ours to release
}
void ExecuteCommand(const std::string& cmd, int /*flags*/) { g_command_queue.push_back(cmd); }
void ToggleRaceInterface(bool visible) { g_interface_visible = visible; }
int GetCurrentGameState() { return g_game.state; }

class CommandList {
public:
    std::string content;
    int refs = 1;
    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
    std::string GetContent() const { return content; }
    void SetContent(const std::string& c) { content = c; }
    void Process(int /*option*/) {
        std::istringstream in(content);
        std::string line;
        while (std::getline(in, line)) {
            if (!line.empty()) g_command_queue.push_back(line);
        }
    }
};
CommandList* CommandListFactory() { return new CommandList(); }

class PluginInfo {
public:
    std::string author, name, description, version;
    int refs = 1;
    void AddRef() { ++refs; }
    void Release() {
        if (--refs == 0) delete this;
    }
};
PluginInfo* PluginInfoFactory() { return new PluginInfo(); }

struct Vec2 {
    float x, y;
};
void Vec2Default(Vec2* self) { self->x = self->y = 0; }
void Vec2Init(float x, float y, Vec2* self) { self->x = x; self->y = y; }

// Screenshot of the toy world: BGRA, top row first; texture scrolls with the car. Empty while the
// window is minimised; an open console covers the top quarter in white.
CScriptArray* CaptureScreenshot(Vec2& size) {
    if (g_game.minimised) return NewByteArray(0);
    const int w = static_cast<int>(size.x), h = static_cast<int>(size.y);
    CScriptArray* a = NewByteArray(static_cast<size_t>(std::max(0, w * h * 4)));
    auto* p = static_cast<uint8_t*>(w * h > 0 ? a->At(0) : nullptr);
    if (g_physics.enabled && w > 0 && h > 0) {  // the simulator's frame, gray in B, G and R
        const std::vector<uint8_t> gray = g_physics.Frame(w, h);
        for (int i = 0; i < w * h; ++i) {
            const bool console = g_game.console_open && i / w < h / 4;
            const uint8_t v = console ? 255 : gray[static_cast<size_t>(i)];
            p[4 * i] = p[4 * i + 1] = p[4 * i + 2] = v;
            p[4 * i + 3] = 255;
        }
        return a;
    }
    const int shift = static_cast<int>(g_game.z * 8.0);
    for (int row = 0; row < h; ++row) {
        for (int col = 0; col < w; ++col) {
            uint8_t* px = p + 4 * (row * w + col);
            const bool console = g_game.console_open && row < h / 4;
            px[0] = console ? 255 : static_cast<uint8_t>((row + shift) & 0x7F);
            px[1] = console ? 255 : static_cast<uint8_t>(col & 0x7F);
            px[2] = console ? 255 : static_cast<uint8_t>(static_cast<int>(g_game.v * 2) & 0x7F);
            px[3] = 255;
        }
    }
    return a;
}
void FocusGameWindow() { HostLog("window focused"); }
void ShowGameWindow() {
    if (g_game.minimised) HostLog("window restored");
    g_game.minimised = false;
}

unsigned StringGetLength(const std::string& s) { return static_cast<unsigned>(s.size()); }

// ------------------------------------------------------------------ engine setup
void MessageCallback(const asSMessageInfo* msg, void*) {
    const char* type = msg->type == asMSGTYPE_ERROR ? "ERROR" : msg->type == asMSGTYPE_WARNING ? "WARN" : "INFO";
    std::fprintf(stderr, "[angelscript] %s (%d, %d) %s: %s\n", msg->section, msg->row, msg->col, type, msg->message);
}

void Check(int r, const char* what) {
    if (r < 0) {
        std::fprintf(stderr, "[host] registration failed (%d): %s\n", r, what);
        std::exit(3);
    }
}

#define REG(call, what) Check((call), what)

void RegisterEnumValues(asIScriptEngine* e, const char* name, const std::vector<std::pair<const char*, int>>& values) {
    REG(e->RegisterEnum(name), name);
    for (const auto& kv : values) REG(e->RegisterEnumValue(name, kv.first, kv.second), kv.first);
}

asUINT g_addon_functions = 0;  // global functions of the string/array add-ons, not part of the check

void RegisterApi(asIScriptEngine* e) {
    RegisterStdString(e);
    RegisterScriptArray(e, true);
    g_addon_functions = e->GetGlobalFunctionCount();
    // TMInterface spells lengths with a capital L.
    REG(e->RegisterObjectMethod("array<T>", "uint get_Length() const property", asMETHOD(CScriptArray, GetSize),
                                asCALL_THISCALL), "array.Length");
    REG(e->RegisterObjectMethod("string", "uint get_Length() const property", asFUNCTION(StringGetLength),
                                asCALL_CDECL_OBJLAST), "string.Length");

    RegisterEnumValues(e, "Severity", {{"Info", 0}, {"Success", 1}, {"Warning", 2}, {"Error", 3}});
    RegisterEnumValues(e, "InputType", {{"None", -1}, {"Down", IT_DOWN}, {"Up", IT_UP}, {"Left", IT_LEFT},
                                        {"Right", IT_RIGHT}, {"Steer", 4}, {"Gas", 5}, {"Respawn", 6},
                                        {"GiveUp", 7}, {"Horn", 8}, {"FakeFinish", 9}});
    RegisterEnumValues(e, "ExecuteCommandFlags", {{"None", 0}, {"AppendHistory", 1}, {"Echo", 2},
                                                  {"SuppressOutput", 8}, {"Default", 3}});
    RegisterEnumValues(e, "CommandListProcessOption", {{"OnlyParse", 0}, {"QueueAndExecute", 1},
                                                       {"ExecuteImmediately", 2}});
    RegisterEnumValues(e, "InputFormatFlags", {{"None", 0}, {"DecimalTime", 1}, {"SeperateRelease", 2}, {"Default", 4}});

    REG(e->RegisterGlobalFunction("void log(const string &in str, Severity severity = Severity::Info)",
                                  asFUNCTION(ScriptLog), asCALL_CDECL), "log");
    REG(e->RegisterGlobalFunction("void print(const string &in str, Severity severity = Severity::Info)",
                                  asFUNCTION(ScriptLog), asCALL_CDECL), "print");

    e->SetDefaultNamespace("TM");
    RegisterEnumValues(e, "GameState", {{"None", 0}, {"StartUp", GS_STARTUP}, {"Menus", GS_MENUS},
                                        {"LocalRace", GS_RACE}, {"LocalRaceEndDialog", GS_RACE_END_DIALOG}});
    REG(e->RegisterObjectType("PlayerInfo", 0, asOBJ_REF | asOBJ_NOCOUNT), "TM::PlayerInfo");
    REG(e->RegisterObjectProperty("PlayerInfo", "bool RaceFinished", asOFFSET(PlayerInfo, race_finished)), "RaceFinished");
    REG(e->RegisterObjectProperty("PlayerInfo", "int RaceTime", asOFFSET(PlayerInfo, race_time)), "RaceTime");
    REG(e->RegisterObjectType("InputEventBuffer", 0, asOBJ_REF | asOBJ_NOCOUNT), "TM::InputEventBuffer");
    REG(e->RegisterObjectMethod("InputEventBuffer",
                                "string ToCommandsText(InputFormatFlags flags = InputFormatFlags::Default)",
                                asMETHOD(InputEventBuffer, ToCommandsText), asCALL_THISCALL), "ToCommandsText");
    REG(e->RegisterObjectMethod("InputEventBuffer", "uint get_Length() property", asMETHOD(InputEventBuffer, Length),
                                asCALL_THISCALL), "InputEventBuffer.Length");
    REG(e->RegisterObjectMethod("InputEventBuffer", "void Clear()", asMETHOD(InputEventBuffer, Clear), asCALL_THISCALL),
        "InputEventBuffer.Clear");
    e->SetDefaultNamespace("");

    e->SetDefaultNamespace("Time");
    REG(e->RegisterGlobalFunction("uint64 get_Now() property", asFUNCTION(NowMs), asCALL_CDECL), "Time::Now");
    e->SetDefaultNamespace("");

    REG(e->RegisterObjectType("vec2", sizeof(Vec2), asOBJ_VALUE | asOBJ_POD | asOBJ_APP_CLASS | asOBJ_APP_CLASS_ALLFLOATS),
        "vec2");
    REG(e->RegisterObjectBehaviour("vec2", asBEHAVE_CONSTRUCT, "void f()", asFUNCTION(Vec2Default), asCALL_CDECL_OBJLAST),
        "vec2()");
    REG(e->RegisterObjectBehaviour("vec2", asBEHAVE_CONSTRUCT, "void f(float x, float y)", asFUNCTION(Vec2Init),
                                   asCALL_CDECL_OBJLAST), "vec2(x, y)");
    REG(e->RegisterObjectProperty("vec2", "float x", asOFFSET(Vec2, x)), "vec2.x");
    REG(e->RegisterObjectProperty("vec2", "float y", asOFFSET(Vec2, y)), "vec2.y");

    e->SetDefaultNamespace("Graphics");
    REG(e->RegisterGlobalFunction("array<uint8>@ CaptureScreenshot(vec2 &inout size)", asFUNCTION(CaptureScreenshot),
                                  asCALL_CDECL), "CaptureScreenshot");
    REG(e->RegisterGlobalFunction("void FocusGameWindow()", asFUNCTION(FocusGameWindow), asCALL_CDECL), "FocusGameWindow");
    REG(e->RegisterGlobalFunction("void ShowGameWindow()", asFUNCTION(ShowGameWindow), asCALL_CDECL), "ShowGameWindow");
    e->SetDefaultNamespace("");

    e->SetDefaultNamespace("Net");
    REG(e->RegisterObjectType("Socket", 0, asOBJ_REF), "Net::Socket");
    REG(e->RegisterObjectBehaviour("Socket", asBEHAVE_FACTORY, "Socket@ f()", asFUNCTION(SocketFactory), asCALL_CDECL),
        "Socket()");
    REG(e->RegisterObjectBehaviour("Socket", asBEHAVE_ADDREF, "void f()", asMETHOD(Socket, AddRef), asCALL_THISCALL), "a");
    REG(e->RegisterObjectBehaviour("Socket", asBEHAVE_RELEASE, "void f()", asMETHOD(Socket, Release), asCALL_THISCALL), "r");
    const std::vector<std::pair<const char*, asSFuncPtr>> socket_methods = {
        {"bool Listen(const string &in host, uint16 port)", asMETHOD(Socket, Listen)},
        {"Socket@ Accept(uint timeoutMs = 4294967295)", asMETHOD(Socket, Accept)},
        {"uint get_Available() property", asMETHOD(Socket, Available)},
        {"void set_NoDelay(bool value) property", asMETHOD(Socket, SetNoDelay)},
        {"string get_RemoteIP() property", asMETHOD(Socket, RemoteIP)},
        {"int ReadInt32()", asMETHOD(Socket, ReadInt32)},
        {"uint ReadUint32()", asMETHOD(Socket, ReadUint32)},
        {"float ReadFloat()", asMETHOD(Socket, ReadFloat)},
        {"uint8 ReadUint8()", asMETHOD(Socket, ReadUint8)},
        {"array<uint8>@ ReadBytes(uint bytes)", asMETHOD(Socket, ReadBytes)},
        {"string ReadString(uint bytes)", asMETHOD(Socket, ReadString)},
        {"bool Write(int value)", asMETHOD(Socket, WriteInt)},
        {"bool Write(uint value)", asMETHOD(Socket, WriteUint)},
        {"bool Write(const array<uint8> &in data)", asMETHOD(Socket, WriteBytes)},
        {"bool Write(const string &in data)", asMETHOD(Socket, WriteString)},
    };
    for (const auto& m : socket_methods) REG(e->RegisterObjectMethod("Socket", m.first, m.second, asCALL_THISCALL), m.first);
    e->SetDefaultNamespace("");

    REG(e->RegisterObjectType("SimulationState", 0, asOBJ_REF), "SimulationState");
    REG(e->RegisterObjectBehaviour("SimulationState", asBEHAVE_FACTORY, "SimulationState@ f()", asFUNCTION(StateFactory),
                                   asCALL_CDECL), "SimulationState()");
    REG(e->RegisterObjectBehaviour("SimulationState", asBEHAVE_FACTORY, "SimulationState@ f(const array<uint8> &in array)",
                                   asFUNCTION(StateFactoryFromArray), asCALL_CDECL), "SimulationState(array)");
    REG(e->RegisterObjectBehaviour("SimulationState", asBEHAVE_ADDREF, "void f()", asMETHOD(SimulationState, AddRef),
                                   asCALL_THISCALL), "a");
    REG(e->RegisterObjectBehaviour("SimulationState", asBEHAVE_RELEASE, "void f()", asMETHOD(SimulationState, Release),
                                   asCALL_THISCALL), "r");
    REG(e->RegisterObjectMethod("SimulationState", "array<uint8>@ ToArray()", asMETHOD(SimulationState, ToArray),
                                asCALL_THISCALL), "ToArray");

    REG(e->RegisterObjectType("SimulationManager", 0, asOBJ_REF | asOBJ_NOCOUNT), "SimulationManager");
    const std::vector<std::pair<const char*, asSFuncPtr>> sim_methods = {
        {"bool get_InRace() property", asMETHOD(SimulationManager, InRace)},
        {"int get_RaceTime() property", asMETHOD(SimulationManager, RaceTime)},
        {"int get_TickTime() property", asMETHOD(SimulationManager, TickTime)},
        {"TM::PlayerInfo@ get_PlayerInfo() property", asMETHOD(SimulationManager, GetPlayerInfo)},
        {"TM::InputEventBuffer@ get_InputEvents() property", asMETHOD(SimulationManager, GetInputEvents)},
        {"void SetSpeed(float speed)", asMETHOD(SimulationManager, SetSpeed)},
        {"void GiveUp()", asMETHOD(SimulationManager, GiveUp)},
        {"void PreventSimulationFinish()", asMETHOD(SimulationManager, PreventSimulationFinish)},
        {"SimulationState@ SaveState()", asMETHOD(SimulationManager, SaveState)},
        {"void RewindToState(const SimulationState &in state, bool resetCamera = true)",
         asMETHOD(SimulationManager, RewindToState)},
        {"void ResetCamera()", asMETHOD(SimulationManager, ResetCamera)},
        {"void SetInputState(InputType state, int value)", asMETHOD(SimulationManager, SetInputState)},
    };
    for (const auto& m : sim_methods) {
        REG(e->RegisterObjectMethod("SimulationManager", m.first, m.second, asCALL_THISCALL), m.first);
    }
    REG(e->RegisterGlobalFunction("SimulationManager@ GetSimulationManager()", asFUNCTION(GetSimulationManager),
                                  asCALL_CDECL), "GetSimulationManager");

    REG(e->RegisterFuncdef("void OnCustomCommand(int fromTime, int toTime, const string &in commandLine, "
                           "const array<string> &in args)"), "funcdef OnCustomCommand");
    REG(e->RegisterGlobalFunction("bool RegisterVariable(const string &in name, double defaultVal)",
                                  asFUNCTION(RegisterVariableDouble), asCALL_CDECL), "RegisterVariable(double)");
    REG(e->RegisterGlobalFunction("bool RegisterVariable(const string &in name, bool defaultVal)",
                                  asFUNCTION(RegisterVariableBool), asCALL_CDECL), "RegisterVariable(bool)");
    REG(e->RegisterGlobalFunction("bool RegisterVariable(const string &in name, const string &in defaultVal)",
                                  asFUNCTION(RegisterVariableString), asCALL_CDECL), "RegisterVariable(string)");
    REG(e->RegisterGlobalFunction("double GetVariableDouble(const string &in name)", asFUNCTION(GetVariableDouble),
                                  asCALL_CDECL), "GetVariableDouble");
    REG(e->RegisterGlobalFunction("void RegisterCustomCommand(const string &in name, const string &in description, "
                                  "OnCustomCommand@ callback)", asFUNCTION(RegisterCustomCommand), asCALL_CDECL),
        "RegisterCustomCommand");
    REG(e->RegisterGlobalFunction("void ExecuteCommand(const string &in input, "
                                  "ExecuteCommandFlags flags = ExecuteCommandFlags::Default)",
                                  asFUNCTION(ExecuteCommand), asCALL_CDECL), "ExecuteCommand");
    REG(e->RegisterGlobalFunction("void ToggleRaceInterface(bool visible)", asFUNCTION(ToggleRaceInterface), asCALL_CDECL),
        "ToggleRaceInterface");
    REG(e->RegisterGlobalFunction("TM::GameState GetCurrentGameState()", asFUNCTION(GetCurrentGameState), asCALL_CDECL),
        "GetCurrentGameState");

    REG(e->RegisterObjectType("CommandList", 0, asOBJ_REF), "CommandList");
    REG(e->RegisterObjectBehaviour("CommandList", asBEHAVE_FACTORY, "CommandList@ f()", asFUNCTION(CommandListFactory),
                                   asCALL_CDECL), "CommandList()");
    REG(e->RegisterObjectBehaviour("CommandList", asBEHAVE_ADDREF, "void f()", asMETHOD(CommandList, AddRef),
                                   asCALL_THISCALL), "a");
    REG(e->RegisterObjectBehaviour("CommandList", asBEHAVE_RELEASE, "void f()", asMETHOD(CommandList, Release),
                                   asCALL_THISCALL), "r");
    REG(e->RegisterObjectMethod("CommandList", "string get_Content() property", asMETHOD(CommandList, GetContent),
                                asCALL_THISCALL), "get_Content");
    REG(e->RegisterObjectMethod("CommandList", "void set_Content(const string &in content) property",
                                asMETHOD(CommandList, SetContent), asCALL_THISCALL), "set_Content");
    REG(e->RegisterObjectMethod("CommandList",
                                "void Process(CommandListProcessOption option = CommandListProcessOption::QueueAndExecute)",
                                asMETHOD(CommandList, Process), asCALL_THISCALL), "Process");

    REG(e->RegisterObjectType("PluginInfo", 0, asOBJ_REF), "PluginInfo");
    REG(e->RegisterObjectBehaviour("PluginInfo", asBEHAVE_FACTORY, "PluginInfo@ f()", asFUNCTION(PluginInfoFactory),
                                   asCALL_CDECL), "PluginInfo()");
    REG(e->RegisterObjectBehaviour("PluginInfo", asBEHAVE_ADDREF, "void f()", asMETHOD(PluginInfo, AddRef),
                                   asCALL_THISCALL), "a");
    REG(e->RegisterObjectBehaviour("PluginInfo", asBEHAVE_RELEASE, "void f()", asMETHOD(PluginInfo, Release),
                                   asCALL_THISCALL), "r");
    REG(e->RegisterObjectProperty("PluginInfo", "string Author", asOFFSET(PluginInfo, author)), "Author");
    REG(e->RegisterObjectProperty("PluginInfo", "string Name", asOFFSET(PluginInfo, name)), "Name");
    REG(e->RegisterObjectProperty("PluginInfo", "string Description", asOFFSET(PluginInfo, description)), "Description");
    REG(e->RegisterObjectProperty("PluginInfo", "string Version", asOFFSET(PluginInfo, version)), "Version");
}

// Prints what RegisterApi registered (add-on string/array methods excepted), one per line:
//   FUNC <ns>|<decl>   METHOD <type>|<decl>   PROP <type>|<decl>   ENUM <ns::enum>|<name>=<value>   FUNCDEF <decl>
// Factories print as METHOD <type>|<type>@ <type>(params), i.e. the constructor's parameters.
std::string Ns(const char* ns) { return ns && *ns ? std::string(ns) : std::string(""); }

void DumpApi(asIScriptEngine* e) {
    for (asUINT i = g_addon_functions; i < e->GetGlobalFunctionCount(); ++i) {
        asIScriptFunction* f = e->GetGlobalFunctionByIndex(i);
        std::printf("FUNC %s|%s\n", Ns(f->GetNamespace()).c_str(), f->GetDeclaration(false, false, false));
    }
    for (asUINT i = 0; i < e->GetObjectTypeCount(); ++i) {
        asITypeInfo* t = e->GetObjectTypeByIndex(i);
        std::string name = Ns(t->GetNamespace()).empty() ? t->GetName() : Ns(t->GetNamespace()) + "::" + t->GetName();
        const bool addon = name == "string" || name == "array";
        for (asUINT j = 0; j < t->GetMethodCount(); ++j) {
            asIScriptFunction* m = t->GetMethodByIndex(j);
            if (addon && std::string(m->GetName()) != "get_Length") continue;
            std::printf("METHOD %s|%s\n", name.c_str(), m->GetDeclaration(false, false, false));
        }
        for (asUINT j = 0; j < t->GetPropertyCount(); ++j) {
            std::printf("PROP %s|%s\n", name.c_str(), t->GetPropertyDeclaration(j, false));
        }
        for (asUINT j = 0; j < t->GetFactoryCount() && !addon; ++j) {
            std::printf("CTOR %s|%s\n", name.c_str(), t->GetFactoryByIndex(j)->GetDeclaration(false, false, false));
        }
        for (asUINT j = 0; j < t->GetBehaviourCount() && !addon; ++j) {
            asEBehaviours b;
            asIScriptFunction* f = t->GetBehaviourByIndex(j, &b);
            if (b == asBEHAVE_CONSTRUCT) std::printf("CTOR %s|%s\n", name.c_str(), f->GetDeclaration(false, false, false));
        }
    }
    for (asUINT i = 0; i < e->GetEnumCount(); ++i) {
        asITypeInfo* t = e->GetEnumByIndex(i);
        std::string name = Ns(t->GetNamespace()).empty() ? t->GetName() : Ns(t->GetNamespace()) + "::" + t->GetName();
        for (asUINT j = 0; j < t->GetEnumValueCount(); ++j) {
            int value = 0;
            const char* n = t->GetEnumValueByIndex(j, &value);
            std::printf("ENUM %s|%s=%d\n", name.c_str(), n, value);
        }
    }
    for (asUINT i = 0; i < e->GetFuncdefCount(); ++i) {
        asITypeInfo* t = e->GetFuncdefByIndex(i);
        if (t->GetParentType() != nullptr) continue;  // add-on callbacks (array's less-than)
        std::printf("FUNCDEF %s\n", t->GetFuncdefSignature()->GetDeclaration(false, false, false));
    }
}

// ------------------------------------------------------------------ calling the plugin
asIScriptContext* g_ctx = nullptr;

bool Prepare(asIScriptFunction* f) {
    if (f == nullptr) return false;
    if (g_ctx->Prepare(f) < 0) {
        HostLog(std::string("cannot prepare ") + f->GetDeclaration());
        std::exit(4);
    }
    return true;
}

bool g_exit_on_script_exception = false;  // --script-exceptions exit
uint64_t g_script_exceptions = 0;

// A script exception ends the callback's call; the plugin stays loaded (see the header).
void Run(asIScriptFunction* f) {
    const int r = g_ctx->Execute();
    if (r == asEXECUTION_FINISHED) return;
    std::string why = "did not finish";
    if (r == asEXECUTION_EXCEPTION) {
        why = g_ctx->GetExceptionString();
        const asIScriptFunction* where = g_ctx->GetExceptionFunction();
        const char* section = where != nullptr ? where->GetScriptSectionName() : nullptr;
        why += std::string(" (") + (section != nullptr ? section : "?") + " line " +
               std::to_string(g_ctx->GetExceptionLineNumber()) + ")";
    }
    ++g_script_exceptions;
    HostLog(std::string("script exception in ") + f->GetDeclaration() + ": " + why);
    if (g_exit_on_script_exception || r != asEXECUTION_EXCEPTION) {
        std::printf("TERMINATED script-error\n");
        std::fflush(stdout);
        std::exit(5);
    }
}

struct Callbacks {
    asIScriptFunction *main = nullptr, *render = nullptr, *run_step = nullptr, *cp_changed = nullptr,
                      *lap_changed = nullptr, *state_changed = nullptr, *info = nullptr, *disabled = nullptr;
} g_cb;

void CallNoArg(asIScriptFunction* f) {
    if (!Prepare(f)) return;
    Run(f);
}
void CallRunStep() {
    if (!Prepare(g_cb.run_step)) return;
    g_ctx->SetArgObject(0, &g_sim);
    Run(g_cb.run_step);
}
void CallCountChanged(asIScriptFunction* f, int current, int target) {
    if (!Prepare(f)) return;
    g_ctx->SetArgObject(0, &g_sim);
    g_ctx->SetArgDWord(1, static_cast<asDWORD>(current));
    g_ctx->SetArgDWord(2, static_cast<asDWORD>(target));
    Run(f);
}
void SetGameState(GameState s) {
    g_game.state = s;
    if (!Prepare(g_cb.state_changed)) return;
    g_ctx->SetArgDWord(0, static_cast<asDWORD>(s));
    Run(g_cb.state_changed);
}

std::vector<std::string> Split(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    std::string tok;
    while (in >> tok) out.push_back(tok);
    return out;
}

void StartRaceOnLoadedMap() {
    g_game.loading = false;
    g_game.in_race = true;
    g_game.ResetCar();
    SetGameState(GS_RACE);
}

void RunCommand(const std::string& line) {
    auto args = Split(line);
    if (args.empty()) return;
    const std::string& cmd = args[0];
    if (cmd == "set" && args.size() >= 3) {
        if (g_variables.count(args[1])) {
            g_variables[args[1]] = args[2];
        } else if (args[1] == "custom_port") {
            HostLog("Unknown variable: custom_port");  // what the game prints without the plugin
        }  // other builtin variables (countdown_speed, autologin...) are accepted silently
    } else if (cmd == "map" && args.size() >= 2) {
        std::string path = line.substr(line.find("map") + 3);
        while (!path.empty() && (path.front() == ' ' || path.front() == '"')) path.erase(path.begin());
        while (!path.empty() && (path.back() == ' ' || path.back() == '"')) path.pop_back();
        if (g_physics.enabled) {
            std::string error;
            const int count = g_physics.LoadMap(path, error);
            if (count < 1) {
                HostLog("cannot load map " + path + ": " + error);  // the game stays where it was
                return;
            }
            g_game.checkpoints.assign(static_cast<size_t>(count), 0.0);  // only their number is used
        }
        g_game.map = path;
        auto cps = g_game.map_checkpoints.find(path);
        if (cps != g_game.map_checkpoints.end()) g_game.checkpoints = cps->second;
        HostLog("map loaded: " + path);
        g_game.in_race = false;
        if (g_game.map_load_ms > 0) {
            g_game.loading = true;
            g_game.loading_until = NowMs() + static_cast<uint64_t>(g_game.map_load_ms);
        } else {
            StartRaceOnLoadedMap();
        }
    } else if (cmd == "cam" && args.size() >= 2 && g_physics.enabled) {
        if (!g_physics.Camera(std::atoi(args[1].c_str()))) HostLog("unknown camera " + args[1]);
    } else if (cmd == "toggle_console") {
        g_game.console_open = !g_game.console_open;
        HostLog(std::string("console ") + (g_game.console_open ? "opened" : "closed"));
    } else if (g_custom_commands.count(cmd)) {
        asIScriptFunction* f = g_custom_commands[cmd];
        CScriptArray* argv = CScriptArray::Create(g_engine->GetTypeInfoByDecl("array<string>"), asUINT(0));
        std::string command_line = line;
        Prepare(f);
        g_ctx->SetArgDWord(0, static_cast<asDWORD>(-1));
        g_ctx->SetArgDWord(1, static_cast<asDWORD>(-1));
        g_ctx->SetArgObject(2, &command_line);
        g_ctx->SetArgObject(3, argv);
        Run(f);
        argv->Release();
    }  // cam... have no effect here
}

void ProcessCommands() {
    while (!g_command_queue.empty()) {
        std::string c = g_command_queue.front();
        g_command_queue.pop_front();
        RunCommand(c);
    }
}

// A finish that nothing undid ends the race: end dialog, no more simulation.
void EndRace() {
    g_game.finished = true;
    g_game.player.race_finished = true;
    g_game.in_race = false;
    HostLog("race finished: end dialog");
    SetGameState(GS_RACE_END_DIALOG);
}

// One physics tick: RUN_STEP callback, physics, checkpoint callbacks.
void Tick() {
    CallRunStep();
    if (!g_game.in_race) return;
    g_game.Physics();
    const size_t next = g_game.next_cp;
    const bool passed = g_physics.enabled
        ? g_game.physics_checkpoints > static_cast<int>(next)
        : next < g_game.checkpoints.size() && g_game.z >= g_game.checkpoints[next];
    if (!g_game.finished && next < g_game.checkpoints.size() && passed) {
        g_game.next_cp = next + 1;
        g_game.cp_times.push_back(g_game.race_time);
        const int current = static_cast<int>(g_game.cp_times.size());
        const int target = static_cast<int>(g_game.checkpoints.size());
        g_game.prevent_finish = false;
        CallCountChanged(g_cb.cp_changed, current, target);
        // The game decides after the callback, from its checkpoint times (a rewind may have changed them).
        if (current == target && static_cast<int>(g_game.cp_times.size()) == target) {
            if (g_game.prevent_finish && g_game.prevent_finish_works) {
                g_game.cp_times.pop_back();  // as in a simulation context: the finish does not count
                g_game.next_cp = g_game.cp_times.size();
            } else {
                EndRace();
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::string plugin_path, config;
    double max_seconds = 60.0;
    int startup_ms = 100;
    int pre_config_renders = 0;
    bool strict_enum_scope = true;
    bool dump_api = false;
    std::string physics_python, physics_trace, start_map, physics_transport = "pipe";
    int physics_camera = 2;
    for (int i = 1; i < argc; i += 2) {
        std::string k = argv[i];
        if (k == "--dump-api") {
            dump_api = true;
            i -= 1;
            continue;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "option %s needs a value\n", k.c_str());
            return 2;
        }
        std::string v = argv[i + 1];
        if (k == "--plugin") plugin_path = v;
        else if (k == "--config") config = v;
        else if (k == "--max-seconds") max_seconds = std::atof(v.c_str());
        else if (k == "--startup-ms") startup_ms = std::atoi(v.c_str());
        else if (k == "--countdown-ms") g_game.countdown_ms = std::atoi(v.c_str());
        else if (k == "--strict-enum-scope") strict_enum_scope = v != "0";
        else if (k == "--prevent-finish-works") g_game.prevent_finish_works = v != "0";
        else if (k == "--minimised") g_game.minimised = v != "0";
        else if (k == "--lose-input-every") g_game.lose_input_every = std::atoi(v.c_str());
        else if (k == "--map-load-ms") g_game.map_load_ms = std::atoi(v.c_str());
        else if (k == "--pre-config-renders") pre_config_renders = std::atoi(v.c_str());
        else if (k == "--script-exceptions") {
            if (v != "continue" && v != "exit") {
                std::fprintf(stderr, "--script-exceptions must be continue or exit, got %s\n", v.c_str());
                return 2;
            }
            g_exit_on_script_exception = v == "exit";
        }
        else if (k == "--process-name") prctl(PR_SET_NAME, v.c_str(), 0, 0, 0);
        else if (k == "--physics") physics_python = v;
        else if (k == "--physics-trace") physics_trace = v;
        else if (k == "--physics-transport") physics_transport = v;  // pipe (a child process) | embedded
        else if (k == "--physics-batch-ms") g_physics.batch_ms = std::max(0, std::atoi(v.c_str()));
        else if (k == "--camera") physics_camera = std::atoi(v.c_str());
        else if (k == "--start-map") start_map = v;
        else if (k == "--saved-variables") {
            for (const auto& kv : SplitOn(v, ',')) {
                const auto eq = kv.find('=');
                if (eq != std::string::npos) g_saved_variables[kv.substr(0, eq)] = kv.substr(eq + 1);
            }
        } else if (k == "--checkpoints") {
            g_game.checkpoints.clear();
            for (const auto& item : SplitOn(v, ',')) g_game.checkpoints.push_back(std::atof(item.c_str()));
        } else if (k == "--map-checkpoints") {  // "mapA=8,20;mapB=12,30"
            for (const auto& entry : SplitOn(v, ';')) {
                const auto eq = entry.find('=');
                if (eq == std::string::npos) continue;
                std::vector<double> cps;
                for (const auto& item : SplitOn(entry.substr(eq + 1), ',')) cps.push_back(std::atof(item.c_str()));
                g_game.map_checkpoints[entry.substr(0, eq)] = cps;
            }
        } else {
            std::fprintf(stderr, "unknown option %s\n", k.c_str());
            return 2;
        }
    }

    if (physics_transport != "pipe" && physics_transport != "embedded") {  // refused before anything starts
        std::fprintf(stderr, "--physics-transport must be pipe or embedded, got %s\n", physics_transport.c_str());
        return 2;
    }

    g_engine = asCreateScriptEngine();
    g_engine->SetMessageCallback(asFUNCTION(MessageCallback), nullptr, asCALL_CDECL);
    // TMInterface's documented API passes value types by &inout (CaptureScreenshot(vec2 &inout)).
    g_engine->SetEngineProperty(asEP_ALLOW_UNSAFE_REFERENCES, true);
    // Strict mode: enum values must name their enum (MessageType::CSetSpeed), as other public plugins write them.
    g_engine->SetEngineProperty(asEP_REQUIRE_ENUM_SCOPE, strict_enum_scope);
    RegisterApi(g_engine);
    if (dump_api) {
        DumpApi(g_engine);
        g_engine->ShutDownAndRelease();
        return 0;
    }
    if (plugin_path.empty()) {
        std::fprintf(stderr, "usage: %s --plugin FILE.as [--config \"set custom_port N\"] ...\n", argv[0]);
        return 2;
    }
    std::ifstream file(plugin_path);
    if (!file) {
        std::fprintf(stderr, "cannot read %s\n", plugin_path.c_str());
        return 2;
    }
    std::stringstream source;
    source << file.rdbuf();
    asIScriptModule* mod = g_engine->GetModule("plugin", asGM_ALWAYS_CREATE);
    mod->AddScriptSection(plugin_path.c_str(), source.str().c_str(), source.str().size());
    if (mod->Build() < 0) {
        std::printf("TERMINATED compile-error\n");
        std::fflush(stdout);
        return 1;
    }
    std::printf("COMPILED\n");
    std::fflush(stdout);
    if (!physics_python.empty() && physics_transport == "embedded") {
        g_physics.StartEmbedded(physics_python, physics_trace, physics_camera);
    } else if (!physics_python.empty()) {
        g_physics.Start(physics_python, physics_trace, physics_camera);
    }
    g_ctx = g_engine->CreateContext();
    g_cb.main = mod->GetFunctionByDecl("void Main()");
    g_cb.render = mod->GetFunctionByDecl("void Render()");
    g_cb.run_step = mod->GetFunctionByDecl("void OnRunStep(SimulationManager@)");
    g_cb.cp_changed = mod->GetFunctionByDecl("void OnCheckpointCountChanged(SimulationManager@, int, int)");
    g_cb.lap_changed = mod->GetFunctionByDecl("void OnLapCountChanged(SimulationManager@, int, int)");
    g_cb.state_changed = mod->GetFunctionByDecl("void OnGameStateChanged(TM::GameState)");
    g_cb.info = mod->GetFunctionByDecl("PluginInfo@ GetPluginInfo()");
    g_cb.disabled = mod->GetFunctionByDecl("void OnDisabled()");
    if (g_cb.info == nullptr || g_cb.main == nullptr) {
        HostLog("the plugin lacks GetPluginInfo() or Main()");
        std::printf("TERMINATED missing-callbacks\n");
        return 1;
    }
    CallNoArg(g_cb.info);  // required by TMInterface, called before Main
    CallNoArg(g_cb.main);
    // By default no frame renders before the launch's /configstring and Main()'s queued command lists
    // have run (Linesight's plugin, which works in the game, needs that or a game that survives the
    // exception); --pre-config-renders N models a game that renders N frames first.
    for (int i = 0; i < pre_config_renders; ++i) CallNoArg(g_cb.render);
    if (!Split(config).empty()) {
        RunCommand(config);  // the launch's /configstring runs before the plugin's queued command lists
    }
    ProcessCommands();

    const double deadline_ms = max_seconds * 1000.0;
    bool startup_done = false;
    while (NowMs() < deadline_ms) {
        if (!startup_done && NowMs() >= static_cast<uint64_t>(startup_ms)) {
            startup_done = true;
            SetGameState(GS_MENUS);
            if (!start_map.empty()) RunCommand("map " + start_map);
        }
        ProcessCommands();
        if (g_game.loading && NowMs() >= g_game.loading_until) StartRaceOnLoadedMap();
        if (g_game.in_race && g_game.speed > 0) {
            const int ticks = std::max(1, static_cast<int>(std::lround(g_game.speed)));
            for (int i = 0; i < ticks && g_game.speed > 0 && g_game.in_race; ++i) {
                Tick();
                ProcessCommands();
            }
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        CallNoArg(g_cb.render);
    }
    CallNoArg(g_cb.disabled);
    if (g_script_exceptions > 0) HostLog("script exceptions: " + std::to_string(g_script_exceptions));
    if (g_physics.enabled) {
        char buf[128];
        std::snprintf(buf, sizeof(buf), "physics (%s): %llu requests (%llu tick batches taken back), %.3f s waiting",
                      g_physics.embedded ? "embedded" : "pipe", static_cast<unsigned long long>(g_physics.requests),
                      static_cast<unsigned long long>(g_physics.undone), g_physics.seconds);
        HostLog(buf);
        g_physics.Stop();
    }
    for (auto& kv : g_custom_commands) kv.second->Release();
    g_ctx->Release();
    g_engine->ShutDownAndRelease();
    std::printf("TERMINATED timeout\n");
    std::fflush(stdout);
    return 0;
}
