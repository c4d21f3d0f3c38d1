"""Admission webhooks whose logic is an Ansible role (watches.yaml `- webhook:` entries).

    API server --AdmissionReview--> server.py (HTTPS)
      -> review.py (the request, as the role's variables)
      -> runs.py (one warm Ansible run, read-only through the proxy unless side effects)
      -> answer.py (the role's operator_sdk.util.admission_response, or the failure policy;
         patch.py turns a changed object into a JSON patch)
      -> AdmissionReview response

service.py puts it together for the manager: TLS material (tls.py), the configurations the
API server reads (configurations.py), the server and the runs.
"""
