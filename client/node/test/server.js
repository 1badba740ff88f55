'use strict';
// A real phasor-server on free 127.0.0.1 ports for the tests, started from
// $PHASOR_SERVER_BIN (ctest sets it; default: the repository's
// build/server/phasor-server), ready once grpc.health.v1 says SERVING, and
// stopped by its pid. Every wait is bounded.

const { spawn } = require('child_process');
const http = require('http');
const net = require('net');
const path = require('path');
const { EncoderClient } = require('../lib');

const SERVER_BIN = process.env.PHASOR_SERVER_BIN ||
  path.resolve(__dirname, '..', '..', '..', 'build', 'server', 'phasor-server');
const STARTUP_TIMEOUT_MS = 30000;
const STOP_TIMEOUT_MS = 30000;

// A port that was free a moment ago (listen on 0, read it, close).
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Server {
  constructor(flags = [], clientOptions = {}, { metrics = false } = {}) {
    this.flags = flags;
    this.withMetrics = metrics;
    this.clientOptions = clientOptions;
    this.process = null;
    this.log = '';
  }

  get target() {
    return `127.0.0.1:${this.port}`;
  }

  client(options = {}) {
    return new EncoderClient(this.target, { deadlineMs: 10000, ...this.clientOptions, ...options });
  }

  async start() {
    let lastError;
    // Another process may take the port between freePort() and bind: retry
    // with a fresh one when the server exits during startup.
    for (let attempt = 0; attempt < 3; attempt++) {
      this.port = await freePort();
      this.metricsPort = this.withMetrics ? await freePort() : null;
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PHASOR_')));
      env.OMP_NUM_THREADS = '2';
      this.log = '';
      this.exited = false;
      this.process = spawn(SERVER_BIN,
        [`--grpc_address=127.0.0.1:${this.port}`,
          `--metrics_address=${this.withMetrics ? `127.0.0.1:${this.metricsPort}` : ''}`, ...this.flags],
        { env, stdio: ['ignore', 'pipe', 'pipe'] });
      this.process.stdout.on('data', (chunk) => { this.log += chunk; });
      this.process.stderr.on('data', (chunk) => { this.log += chunk; });
      this.exitPromise = new Promise((resolve) => {
        this.process.on('exit', (code, signal) => { this.exited = true; resolve(code === null ? signal : code); });
        this.process.on('error', (error) => { this.exited = true; this.log += String(error); resolve(error); });
      });
      try {
        await this.waitServing();
        return this;
      } catch (error) {
        lastError = error;
        if (!this.exited) {
          await this.stop();
          throw error;
        }
      }
    }
    throw lastError;
  }

  async waitServing() {
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    const client = this.client({ deadlineMs: 2000 });
    try {
      while (Date.now() < deadline) {
        if (this.exited) throw new Error(`phasor-server exited during startup:\n${this.log}`);
        try {
          if (await client.health() === 'SERVING') return;
        } catch (error) {
          // Not listening yet, or not SERVING yet.
        }
        await sleep(50);
      }
    } finally {
      client.close();
    }
    throw new Error(`phasor-server not SERVING after ${STARTUP_TIMEOUT_MS} ms:\n${this.log}`);
  }

  // The Prometheus text of /metrics (servers started with {metrics: true}).
  metrics() {
    return new Promise((resolve, reject) => {
      const request = http.get({ host: '127.0.0.1', port: this.metricsPort, path: '/metrics', timeout: 10000 },
        (response) => {
          let text = '';
          response.on('data', (chunk) => { text += chunk; });
          response.on('end', () => resolve(text));
        });
      request.on('timeout', () => request.destroy(new Error('metrics timed out')));
      request.on('error', reject);
    });
  }

  // SIGTERM, then SIGKILL if it has not exited after STOP_TIMEOUT_MS.
  async stop() {
    if (!this.process || this.exited) return;
    this.process.kill('SIGTERM');
    const timer = setTimeout(() => this.process.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await this.exitPromise;
    clearTimeout(timer);
  }
}

module.exports = { Server, SERVER_BIN, freePort };
