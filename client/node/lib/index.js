'use strict';
// phasor-client: a Node.js client for phasor.v1.Encoder (see README.md).
const client = require('./client');
const tensors = require('./tensors');

module.exports = {
  EncoderClient: client.EncoderClient,
  fieldViolations: client.fieldViolations,
  DEFAULT_PROTO_DIR: client.DEFAULT_PROTO_DIR,
  ...tensors,
};
