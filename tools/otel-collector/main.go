// otel-collector: a minimal OpenTelemetry Collector for ansible-operator's tests, built
// from the collector's own modules (otelcol, the OTLP receiver): what the operator's
// OTLP exporter sends is received, decoded and checked by the real thing.
//
// One exporter of its own, "jsonfile", writes every batch of spans it is given as one
// line of OTLP JSON (pdata's ptrace.JSONMarshaler, the encoding of OTLP/HTTP JSON) to
// its `path`, flushed as it arrives, so a test can read what the collector received.
//
//	otel-collector --config=/path/to/config.yaml
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

var jsonFileType = component.MustNewType("jsonfile")

// jsonFileConfig is the "jsonfile" exporter's configuration.
type jsonFileConfig struct {
	Path string `mapstructure:"path"`
}

func (c *jsonFileConfig) Validate() error {
	if c.Path == "" {
		return errors.New("jsonfile: path must be set")
	}
	return nil
}

type jsonFileExporter struct {
	path      string
	mu        sync.Mutex
	file      *os.File
	marshaler ptrace.JSONMarshaler
}

func (e *jsonFileExporter) Start(context.Context, component.Host) error {
	file, err := os.OpenFile(e.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("jsonfile: %w", err)
	}
	e.file = file
	return nil
}

func (e *jsonFileExporter) Shutdown(context.Context) error {
	if e.file == nil {
		return nil
	}
	return e.file.Close()
}

func (e *jsonFileExporter) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

func (e *jsonFileExporter) ConsumeTraces(_ context.Context, traces ptrace.Traces) error {
	line, err := e.marshaler.MarshalTraces(traces)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// One write per batch: a reader sees whole lines or none of a batch's.
	_, err = e.file.Write(append(line, '\n'))
	return err
}

func newJSONFileFactory() exporter.Factory {
	return exporter.NewFactory(
		jsonFileType,
		func() component.Config { return &jsonFileConfig{} },
		exporter.WithTraces(
			func(_ context.Context, _ exporter.Settings, cfg component.Config) (exporter.Traces, error) {
				return &jsonFileExporter{path: cfg.(*jsonFileConfig).Path}, nil
			},
			component.StabilityLevelDevelopment,
		),
	)
}

func components() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](newJSONFileFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: receivers,
		Exporters: exporters,
		Telemetry: otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otel-collector",
			Description: "OpenTelemetry Collector (OTLP receiver, jsonfile exporter) for ansible-operator's tests",
			Version:     "0.165.0",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "otel-collector: %v\n", err)
		os.Exit(1)
	}
}
