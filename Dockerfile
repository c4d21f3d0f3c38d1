# The ansible-operator base image: an operator's image is FROM this one, adding
# its watches.yaml, roles/ and playbooks/ (see Dockerfile.samples).
#
# One recipe, two flavours: by default the pins of constraints.txt (the newest
# ansible-core); with `--build-arg CONSTRAINTS=constraints-ansible-core-2.18.txt`
# ansible-core 2.18, as Operator SDK's image has it, for operators migrating
# from that image (the same templating semantics).
FROM python:3.13-slim-trixie

# tini reaps the Ansible processes every run forks; the operator runs as PID 2.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

COPY . /usr/src/ansible-operator
# Declared here, after the steps both flavours share, so they share those layers.
ARG CONSTRAINTS=constraints.txt
LABEL io.github.ansible-operator.constraints=${CONSTRAINTS}
# The same install steps as CI (scripts/install-runtime.sh), pinned by $CONSTRAINTS.
RUN CONSTRAINTS=${CONSTRAINTS} /usr/src/ansible-operator/scripts/install-runtime.sh python3 \
 && rm -rf /usr/src/ansible-operator /root/.cache

ENV HOME=/opt/ansible \
    ANSIBLE_GATHERING=explicit \
    ANSIBLE_LOCAL_TEMP=/opt/ansible/.ansible/tmp \
    ANSIBLE_REMOTE_TEMP=/opt/ansible/.ansible/tmp \
    PYTHONUNBUFFERED=1
RUN mkdir -p /opt/ansible/.ansible/tmp \
 && useradd --uid 1001 --gid 0 --home-dir /opt/ansible --no-create-home ansible-operator \
 && chown -R 1001:0 /opt/ansible \
 && chmod -R g=u /opt/ansible
WORKDIR /opt/ansible
USER 1001

ENTRYPOINT ["/usr/bin/tini", "--", "ansible-operator", "run", "--watches-file=./watches.yaml"]
