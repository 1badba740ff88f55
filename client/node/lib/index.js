'use strict';
// phasor-client: a Node.js client for phasor.v1.Encoder (see README.md).
const client = require('./client');
const tensors = require('./tensors');

module.exports = {
  EncoderClient: client.EncoderClient,
  RequestFieldError: client.RequestFieldError,
  fieldViolations: client.fieldViolations,
  findProtoDir: client.findProtoDir,
  DEFAULT_SERVICE_CONFIG: client.DEFAULT_SERVICE_CONFIG,
  ...tensors,
};
